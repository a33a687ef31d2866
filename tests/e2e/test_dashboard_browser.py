"""The dashboard in a real headless Chromium against a real devnet.

Starts ``devnet up -n 2`` (anvil + management + node-1 + node-2), publishes a
skill on node-1, opens node-2's dashboard through the one-time login link,
checks peers and the listing are shown, buys the listing with the Buy button
and saves a screenshot to ``test-artifacts/dashboard.png``.

Needs the Debian packages ``chromium`` and ``chromium-driver``; skipped without them.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from node.api.client import ApiClient, ApiError
from node.devnet.state import DevnetState
from tests.support.tools import missing_tool
from tests.support.wait import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                  "--window-size=1440,2000")


def usdc_text(micro: int) -> str:
    """The page's USDC formatting, from integer micro-USDC with integer arithmetic."""
    whole, fraction = divmod(micro, 1_000_000)
    digits = f"{fraction:06d}".rstrip("0").ljust(2, "0")
    return f"{whole:,}.{digits}"


def test_usdc_text_matches_the_page_rules() -> None:
    assert usdc_text(0) == "0.00"
    assert usdc_text(500_000) == "0.50"
    assert usdc_text(1_234_567_891) == "1,234.567891"


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevnetState]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        missing_tool("headless browser missing: apt-get install -y chromium chromium-driver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing_tool("pip install selenium (dev extra)")
    from node.devnet import manager

    directory = tmp_path_factory.mktemp("devnet")
    state = manager.up(2, directory, embedder="hashing", with_chain=True, timeout_s=120.0)
    try:
        yield state
    finally:
        manager.down(directory)


def client(state: DevnetState, name: str) -> ApiClient:
    from node.devnet.manager import client_for

    return client_for(state.node(name))


@pytest.fixture(scope="module")
def listing(devnet: DevnetState) -> dict[str, Any]:
    seller = client(devnet, "node-1")
    try:
        crystal = seller.post("/v1/crystals", {
            "text": "Summarise a pull request\nRead the diff, group changes by intent and "
                    "write a five-line summary with risks first.",
            "type": "skill", "scope": "public", "category": "code-review",
            "tags": ["git", "review"],
        })
        for _ in range(3):
            seller.post(f"/v1/skills/{crystal['id']}/executions", {"success": True, "reward": 0.9})
        return dict(seller.post(f"/v1/skills/{crystal['id']}/publish"))
    finally:
        seller.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = ARTIFACTS / "chromium-profile"
    shutil.rmtree(profile, ignore_errors=True)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_dashboard_shows_the_devnet_and_buys_a_listing(
    devnet: DevnetState, listing: dict[str, Any], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    ARTIFACTS.mkdir(exist_ok=True)
    buyer_entry = devnet.node("node-2")
    buyer = client(devnet, "node-2")
    try:
        wait_until(what="node-2 to receive node-1's listing over gossip", condition=lambda: any(
            item["listing_id"] == listing["listing_id"]
            for item in buyer.get("/v1/listings")["listings"]), timeout_s=30)
        peer_ids = {p["peer_id"] for p in buyer.get("/v1/peers")["peers"] if p["connected"]}
        login_url = f"http://127.0.0.1:{buyer_entry.api_port}" + buyer.post("/v1/dashboard/login-link")["path"]
    finally:
        buyer.close()
    assert peer_ids, "node-2 has no connected peers"

    try:
        browser.get(login_url)
        assert browser.current_url.endswith("/dashboard"), (
            f"login link did not redirect (is the dashboard router in build_app?): {browser.current_url}")
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="login-page"]'), \
            "the login link did not log in (is the dashboard router in build_app?)"
        assert wait_until(what="node name", condition=lambda: browser.find_element(
            By.CSS_SELECTOR, '[data-testid="node-name"]').text == "node-2")

        def shown_peers() -> set[str] | None:
            rows = browser.find_elements(By.CSS_SELECTOR, '[data-testid="peer-row"]')
            shown = {row.get_attribute("data-peer-id") for row in rows}
            return shown if peer_ids <= shown else None

        wait_until(what="the devnet's peers in the peers table", condition=shown_peers)
        graph_peers = browser.find_elements(By.CSS_SELECTOR, '[data-testid="graph-peer"]')
        assert len(graph_peers) >= len(peer_ids)

        row_selector = f'[data-testid="listing-row"][data-listing-id="{listing["listing_id"]}"]'
        row = wait_until(what="the listing row", condition=lambda: browser.find_element(By.CSS_SELECTOR, row_selector))
        assert "Summarise a pull request" in row.text
        price = row.find_element(By.CSS_SELECTOR, '[data-testid="listing-price"]').text
        assert price == usdc_text(listing["price_micro_usdc"])

        button_selector = f'{row_selector} [data-testid="buy-button"]'
        browser.find_element(By.CSS_SELECTOR, button_selector).click()
        wait_until(what="the confirm step", condition=lambda: "Confirm" in browser.find_element(
            By.CSS_SELECTOR, button_selector).text, timeout_s=30)
        browser.find_element(By.CSS_SELECTOR, button_selector).click()

        result = browser.find_element(By.CSS_SELECTOR, '[data-testid="purchase-result"]')
        outcome = wait_until(what="the purchase result", condition=lambda: (
            result.get_attribute("data-state")
            if result.get_attribute("data-state") in {"ok", "error", "unavailable"} else None
        ), timeout_s=90)
        assert outcome == "ok", f"purchase failed in the page: {result.text}"
        assert "Bought" in result.text

        wait_until(what="the purchase in the history table", condition=lambda: browser.find_elements(
            By.CSS_SELECTOR, '[data-testid="history-bought"]'), timeout_s=30)

        management = client(devnet, "management")
        try:
            management.post("/v1/weather/broadcast",
                            {"level": 0.7, "duration_s": 600, "reason": "dashboard test storm"})
        finally:
            management.close()
        weather = browser.find_element(By.CSS_SELECTOR, '[data-testid="weather"]')
        wait_until(what="the storm alert", condition=lambda: "dashboard test storm" in weather.text, timeout_s=30)

        def remaining() -> str:
            return str(browser.find_element(
                By.CSS_SELECTOR, '[data-testid="weather-remaining"]').text)

        first = wait_until(what="a countdown", condition=lambda: re.fullmatch(r"\d+m \d\ds", remaining()) and remaining())
        wait_until(what="the countdown to tick", condition=lambda: remaining() != first, timeout_s=30)
        # The operator's undo from the Operator card: ban node-1 by hand, then unban it; both
        # land in the audit table (and the node's audit log).
        seller = client(devnet, "node-1")
        try:
            seller_peer = seller.status()["peer_id"]
        finally:
            seller.close()
        ban_form = browser.find_element(By.ID, "ban-form")
        ban_form.find_element(By.NAME, "peer").send_keys(seller_peer)
        ban_form.find_element(By.NAME, "reason").send_keys("dashboard test ban")
        audit = browser.find_element(By.CSS_SELECTOR, '[data-testid="audit-table"]')
        browser.find_element(By.CSS_SELECTOR, '[data-testid="ban-button"]').click()
        wait_until(what="the ban in the audit table", condition=lambda: "trust_ban" in audit.text,
                   timeout_s=30)
        browser.find_element(By.CSS_SELECTOR, '[data-testid="unban-button"]').click()
        wait_until(what="the unban in the audit table", condition=lambda: "trust_unban" in audit.text,
                   timeout_s=30)
        buyer = client(devnet, "node-2")
        try:
            assert [entry["action"] for entry in buyer.audit()] == ["trust_ban", "trust_unban"]
            row = next(r for r in buyer.trust_rows() if r["peer_id"] == seller_peer)
            assert row["level"] != "banned"
        finally:
            buyer.close()
        # Every SEVERE entry counts, "Failed to load resource" too: it is a 404 from a route.
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, json.dumps(errors, indent=2)
    finally:
        browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))
        _save_logs(devnet)


def _save_logs(state: DevnetState) -> None:
    """Keep node-2's log tail next to the screenshot: it says why a purchase failed."""
    try:
        log = (Path(state.node("node-2").data_dir) / "node.log").read_text(errors="replace")
        (ARTIFACTS / "dashboard-node-2.log").write_text("\n".join(log.splitlines()[-200:]))
    except (OSError, ApiError):
        pass

"""The living market on a real devnet (anvil + node processes), driven by the real CLI.

A node added with ``crystalmesh devnet add`` after a listing was published sees
it (listings sync), is funded and trusts the management key; a bounty it posts
raises the matching listing's price once the seller re-prices, and it fulfils
the bounty by buying that skill; ``skill unpublish`` removes the listing everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from node.devnet.state import load_state
from tests.support.devnet import Devnet
from tests.support.wait import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SELLER, LATE = "node-1", "late"
SKILL = ("Summarise an nginx error log: count upstream timeouts per minute, list the top "
         "failing upstreams and the first error of each burst")


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    with Devnet(tmp_path_factory.mktemp("living") / "devnet", 1) as net:
        yield net


def listing_ids(devnet: Devnet, name: str) -> set[str]:
    return {item["listing_id"] for item in devnet.api(name).get("/v1/listings")["listings"]}


def publish(devnet: Devnet) -> dict[str, Any]:
    crystal = devnet.cli_json("memory", "add", "--type", "skill", "--scope", "public",
                              "--category", "ops", "--tag", "nginx", "--tag", "logs", SKILL,
                              node=SELLER)
    for _ in range(3):
        devnet.cli("skill", "record-execution", crystal["id"], "--success", "--reward", "0.9",
                   node=SELLER)
    return devnet.cli_json("skill", "publish", crystal["id"], "--name", "nginx error log summary",
                           "--summary", "Counts nginx upstream timeouts per minute and lists "
                           "the failing upstreams", node=SELLER)


def test_late_node_sees_listing_bounty_raises_price_is_fulfilled_and_unpublish_removes_it(
        devnet: Devnet) -> None:
    listing = publish(devnet)
    listing_id, first_price = listing["listing_id"], listing["price_micro_usdc"]

    added = devnet.cli_json("devnet", "add", LATE)
    assert added["name"] == LATE and len(added["bootstrap"]) == 2
    devnet.state = load_state(devnet.dir)
    wait_until(lambda: listing_id in listing_ids(devnet, LATE), 60, "the late node to sync it")
    assert int(devnet.cli_json("wallet", "balance", node=LATE)["usdc_micro"]) == 100_000_000
    status = devnet.cli_json("devnet", "status")
    assert LATE in {node["name"] for node in status["nodes"]}

    bounty = devnet.cli_json("bounty", "post", "need: a skill that summarises nginx error logs "
                             "and upstream timeouts", "--reward", "0.05", node=LATE)
    assert bounty["reward_micro_usdc"] == 50_000
    assert [m["listing_id"] for m in bounty["matches"]] == [listing_id]
    wait_until(lambda: any(b["bounty_id"] == bounty["bounty_id"] for b in
                           devnet.cli_json("bounty", "list", node=SELLER)), 60, "bounty gossiped")
    repriced = devnet.cli_json("skill", "reprice", listing_id, node=SELLER)
    assert repriced["listing_id"] == listing_id and repriced["bounty_matches"] == 1
    assert repriced["price_micro_usdc"] > first_price
    wait_until(lambda: [hit for hit in devnet.cli_json("market", "search", "nginx error log",
                                                       node=LATE)
                        if hit["listing_id"] == listing_id
                        and hit["price_micro_usdc"] == repriced["price_micro_usdc"]
                        and hit["bounty_matches"] == 1], 60, "the new price and the match")

    fulfilled = devnet.cli_json("bounty", "fulfil", bounty["bounty_id"], node=LATE)
    assert fulfilled["fulfilled_by"] == listing_id
    assert fulfilled["purchase"]["price_micro_usdc"] == repriced["price_micro_usdc"]
    assert devnet.cli_json("bounty", "status", bounty["bounty_id"], node=LATE)["status"] == \
        "fulfilled"
    wait_until(lambda: devnet.cli_json("bounty", "status", bounty["bounty_id"],
                                       node=SELLER)["status"] == "fulfilled", 60, "closed everywhere")

    devnet.cli_json("skill", "unpublish", listing_id, node=SELLER)
    wait_until(lambda: all(listing_id not in listing_ids(devnet, name)
                           for name in ("management", SELLER, LATE)), 60, "withdrawn everywhere")

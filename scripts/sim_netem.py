#!/usr/bin/env python3
"""25 crystalmesh nodes on a bad network: network namespaces, 40 ms ± 10 ms, 1 % loss.

    sudo .venv/bin/python scripts/sim_netem.py            # 25 nodes, 3 behind NAT
    sudo .venv/bin/python scripts/sim_netem.py --nodes 8 --nat 2 --listings 3

Builds a devnet (anvil with the devnet token, a management node, funded wallets)
whose hosts are network namespaces joined by veth pairs to a bridge namespace
(``scripts/_netns.py``); every host's link delays each frame 40 ms ± 10 ms and
loses 1 % (``tc netem``, or the same model in ``scripts/_netem_switch.py`` where
the kernel has no sch_netem). Each node knows one bootstrap peer; the rest is
discovery. ``--nat`` nodes sit behind masquerading routers (no inbound).

Measures: listing propagation to every node (from the nodes' own ``received_at_ms``),
purchases end to end (public sellers and NATed sellers; with vouchers, issue 36, each
buyer-seller pair opens a channel, then pays by voucher: both schemes reported apart,
balances checked on chain after every seller's final claim),
weather lock time to every node (from the nodes' log lines), and a late joiner's
catch-up. Reachability (issue 26): each node's AutoNAT verdict, ``--purchases`` of
each kind (public seller, NATed seller, NATed buyer from NATed seller: a relay
carries the first connection; each NATed seller publishes enough listings for that
many NAT-to-NAT purchases), each kind's ``reasons``: every failure as
``"<code> during <phase>"`` (the step the purchase stopped in, from the API's error:
dial, lookup, circuit, stream, answer, verify…) with its count and first message;
``--nat-ports random`` makes the NAT routers symmetric (every mapping a random port:
hole punching always fails, NAT to NAT stays on relays), ``direct_after_dcutr`` (share of NAT purchases whose
buyer-seller connection is direct within ``--dcutr-wait-s``), ``relay_bytes``, and
every trader's on-chain USDC delta against the prices paid; a burst (``--burst`` listings
of one seller bought by ``--burst-buyers`` buyers, ``--burst-at-once`` each at a time),
churn (``restart_refound_s``: a public node killed -9 and restarted on a new port) and a
``--catalogue`` published at once. Prints a summary, the last line is JSON. Without root (or iproute2) it
prints why and exits 0 with ``{"skipped": ...}``. ``--smoke``: 6 nodes (2 behind
NAT), 1 listing, 1 purchase of each kind (not run by the suite: it needs root and network
namespaces, see tests/integration/node/test_bench_smoke.py). Namespaces are removed at exit.
Nodes use the hashing embedder: this measures the network, not embeddings.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from _bench import add_smoke_flag, print_result, quantiles, smoke
from _netns import Topology, enter_namespace, kernel_has_netem, why_not_available

REPO = Path(__file__).resolve().parents[1]

API_PORT = 8080
P2P_PORT = 4001
CHAIN_ADDRESS = "10.77.0.254"
SKILL = "Recover a wedged {n} deploy: drain the node, roll back the last migration, replay the queue"


class Node:
    def __init__(self, name: str, ns: str, address: str, data_dir: Path, nat: bool) -> None:
        self.name, self.ns, self.address, self.data_dir, self.nat = name, ns, address, data_dir, nat
        self.executor = ThreadPoolExecutor(1, initializer=enter_namespace, initargs=(ns,))
        self.info: dict[str, Any] = {}
        self._client: httpx.Client | None = None
        self.process: Any = None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.executor.submit(fn, *args).result()

    def _http(self) -> httpx.Client:
        if self._client is None:
            token = (self.data_dir / "api.token").read_text().strip()
            self._client = httpx.Client(base_url=f"http://127.0.0.1:{API_PORT}", timeout=120,
                                        headers={"Authorization": f"Bearer {token}"})
        return self._client

    def api(self, method: str, path: str, body: Any = None) -> Any:
        def request() -> Any:
            answer = self._http().request(method, path, json=body)
            answer.raise_for_status()
            return answer.json()
        return self.call(request)

    @property
    def multiaddr(self) -> str:
        return f"/ip4/{self.address}/tcp/{P2P_PORT}/p2p/{self.info['peer_id']}"


def wait(what: str, predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:
            pass
        time.sleep(interval_s)
    print(f"  timed out after {timeout_s:.0f} s: {what}", file=sys.stderr)
    return False


class Sim:
    def __init__(self, args: argparse.Namespace, topology: Topology, root: Path) -> None:
        self.args, self.topology, self.root = args, topology, root
        self.nodes: list[Node] = []
        self.chain: dict[str, Any] = {}
        self.chain_exec = ThreadPoolExecutor(1, initializer=enter_namespace,
                                             initargs=(f"{topology.prefix}-chain",))

    # --- building ------------------------------------------------------------------------
    def start_chain(self) -> None:
        from node.chain.localchain import anvil_binary, deploy_devnet, wait_for_rpc
        from node.config import BASE_SEPOLIA_CHAIN_ID

        ns = self.topology.public_host("chain", CHAIN_ADDRESS)
        rpc_url = f"http://{CHAIN_ADDRESS}:8545"
        self.topology.spawn(ns, [str(anvil_binary()), "--chain-id", str(BASE_SEPOLIA_CHAIN_ID),
                                 "--host", CHAIN_ADDRESS, "--port", "8545", "--silent"],
                            self.root / "anvil.log")
        self.chain_exec.submit(wait_for_rpc, rpc_url, 30.0).result()
        deployed = self.chain_exec.submit(deploy_devnet, rpc_url).result()
        self.chain = {"rpc_url": rpc_url, "chain_id": deployed.chain_id,
                      "token_address": deployed.token_address,
                      "settler_address": deployed.settler_address}

    def add_node(self, index: int, nat: bool) -> Node:
        name = f"n{index:02d}"
        if nat:
            ns, address = self.topology.nat_host(name, f"10.77.2.{index}", index)
        else:
            address = f"10.77.1.{index}"
            ns = self.topology.public_host(name, address)
        node = Node(name, ns, address, self.root / name, nat)
        self.nodes.append(node)
        return node

    def init(self, node: Node, bootstrap: list[str], management_key: str | None) -> None:
        from node.init import init_node

        node.info = init_node(node.data_dir, name=node.name, embedder="hashing",
                              listen=f"/ip4/{node.address}/tcp/{P2P_PORT}", api_port=API_PORT,
                              bootstrap=bootstrap, chain=self.chain,
                              management_keys=[management_key] if management_key else None)

    def fund(self, nodes: list[Node]) -> None:
        from node.chain.localchain import fund

        self.chain_exec.submit(fund, self.chain["rpc_url"], [n.info["wallet_address"] for n in nodes],
                               usdc_micro=100_000_000, eth_wei=10**19,
                               token_address=self.chain["token_address"]).result()

    def spawn(self, node: Node) -> None:
        # ``--scheme exact``: every purchase one on-chain transfer, as before issue 36.
        vouchers = "true" if self.args.scheme == "voucher" else "false"
        env = {"CRYSTALMESH_MARKET_VOUCHERS": vouchers} | os.environ | {"PYTHONPATH": str(REPO)}
        node.process = self.topology.spawn(
            node.ns, [sys.executable, "-m", "node.cli.main", "--data-dir", str(node.data_dir), "run"],
            node.data_dir / "node.log", env)

    def restart_on_new_port(self, node: Node, port: int) -> None:
        """kill -9 the node's process and start it again listening on ``port``."""
        node.process.kill()
        node.process.wait(timeout=30)
        config = node.data_dir / "node.toml"
        config.write_text(config.read_text().replace(f"/tcp/{P2P_PORT}", f"/tcp/{port}"))
        node._client = None
        self.spawn(node)

    def catalogue(self, seller: Node, count: int) -> list[str]:
        """``count`` proven skills on ``seller``, then published at once (``POST /v1/skills/publish``)."""
        for n in range(count):
            crystal = seller.api("POST", "/v1/crystals", {
                "text": SKILL.format(n=f"catalogue-{seller.name}-{n}") + f" (variant {n})",
                "type": "skill", "scope": "public", "category": "ops"})
            for _ in range(3):
                seller.api("POST", f"/v1/skills/{crystal['id']}/executions",
                           {"success": True, "reward": 0.9})
        published: list[str] = []
        while True:
            answer = seller.api("POST", "/v1/skills/publish", {"all": True, "limit": 128})
            published += [item["listing_id"] for item in answer["published"]]
            if not answer["published"] or answer["remaining"] == 0:
                return published

    def usdc(self, address: str) -> int:
        from node.chain.wallet import balances

        found = self.chain_exec.submit(balances, self.chain["rpc_url"], self.chain["token_address"],
                                       address).result()
        return int(found["usdc_micro"])

    def build(self) -> None:
        args = self.args
        self.start_chain()
        nat_from = args.nodes - args.nat + 1
        for index in range(1, args.nodes + 1):
            self.add_node(index, nat=index >= nat_from)
        # The late joiner's host is wired now (the switch's ports are fixed); it starts later.
        self.late = self.add_node(args.nodes + 1, nat=False)
        self.nodes.remove(self.late)
        self.link_model = self.topology.start_forwarding(self.root / "switch.log")
        management, seed = self.nodes[0], self.nodes[1]
        self.init(management, [], None)
        key = management.info["public_key"]
        self.init(seed, [], key)
        for node in self.nodes:
            if node not in (management, seed):
                self.init(node, [seed.multiaddr], key)
        self.init(management, [seed.multiaddr], key)
        self.init(seed, [management.multiaddr], key)
        self.init(self.late, [seed.multiaddr], key)
        self.fund([*self.nodes, self.late])
        for node in self.nodes:
            self.spawn(node)

    # --- measuring -------------------------------------------------------------------------
    def publish(self, seller: Node, n: int) -> dict[str, Any]:
        crystal = seller.api("POST", "/v1/crystals", {"text": SKILL.format(n=f"{seller.name}-{n}"),
                                                      "type": "skill", "scope": "public",
                                                      "category": "ops"})
        for _ in range(3):
            seller.api("POST", f"/v1/skills/{crystal['id']}/executions", {"success": True, "reward": 0.9})
        listing: dict[str, Any] = seller.api("POST", f"/v1/skills/{crystal['id']}/publish",
                                             {"name": f"wedged deploy {seller.name}-{n}"})
        return listing

    def listings_everywhere(self, listing_ids: list[str], nodes: list[Node],
                            timeout_s: float) -> dict[str, dict[str, int]]:
        """{node: {listing id: received_at_ms}} once every node has them all (or timeout)."""
        seen: dict[str, dict[str, int]] = {node.name: {} for node in nodes}

        def poll() -> bool:
            for node in nodes:
                if len(seen[node.name]) < len(listing_ids):
                    for row in node.api("GET", "/v1/listings")["listings"]:
                        if row["listing_id"] in listing_ids:
                            seen[node.name][row["listing_id"]] = row["received_at_ms"]
            return all(len(found) == len(listing_ids) for found in seen.values())

        wait("listings on every node", poll, timeout_s)
        return seen

    def weather_lock(self) -> tuple[list[float], int]:
        management = self.nodes[0]
        started = time.time()
        management.api("POST", "/v1/weather/broadcast",
                       {"level": 0.9, "duration_s": 30, "reason": "sim: lock-down drill"})
        locked: dict[str, float] = {}

        def poll() -> bool:
            for node in self.nodes[1:]:
                if node.name in locked:
                    continue
                for line in (node.data_dir / "node.log").read_text(errors="replace").splitlines():
                    if "weather alert level=" in line:
                        stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                        if stamp >= started - 1:
                            locked[node.name] = (stamp - started) * 1000
            return len(locked) == len(self.nodes) - 1

        wait("weather on every node", poll, 60, 0.25)
        return list(locked.values()), len(self.nodes) - 1 - len(locked)

    def buy(self, buyer: Node, listing: dict[str, Any], again: bool = False) -> Bought:
        """One purchase (``again``: of a listing the buyer already owns, paid again)."""
        started = time.monotonic()
        try:
            bought = buyer.api("POST", "/v1/purchases", {"listing_id": listing["listing_id"],
                                                         "max_price_micro_usdc": 1_000_000,
                                                         "again": again})
            # The price actually paid: a listing re-prices as its unique buyers grow.
            return Bought(True, (time.monotonic() - started) * 1000, "",
                          int(bought["price_micro_usdc"]), str(bought.get("scheme") or "exact"),
                          int(bought.get("deposit_micro_usdc") or 0))
        except httpx.HTTPStatusError as error:
            return Bought(False, (time.monotonic() - started) * 1000,
                          failure_reason(error.response))
        except httpx.HTTPError as error:  # the API itself did not answer
            return Bought(False, (time.monotonic() - started) * 1000,
                          f"api during request: {error!r}"[:300])


@dataclass(frozen=True)
class Bought:
    """A purchase's outcome: ``why`` is ``"<code> during <phase>: <message>"`` for a failure;
    ``scheme`` is what paid (``exact`` or ``batch-settlement``), ``deposit`` what the
    purchase put into a channel (a channel-opening or top-up purchase waits for the chain)."""

    ok: bool
    ms: float
    why: str
    price: int = 0
    scheme: str = ""
    deposit: int = 0


def failure_reason(response: httpx.Response) -> str:
    """``"<code> during <phase>: <message>"`` from a purchase's error answer (any body)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return f"http_{response.status_code} during unknown: {response.text[:200]}"
    return (f"{body.get('code', 'error')} during {body.get('phase') or 'unknown'}: "
            f"{str(body.get('error', ''))[:200]}")


def reason_counts(failures: list[str]) -> dict[str, dict[str, Any]]:
    """``{"<code> during <phase>": {"count": n, "message": first message}}`` of failures."""
    found: dict[str, dict[str, Any]] = {}
    for why in failures:
        key, _, message = why.partition(": ")
        entry = found.setdefault(key, {"count": 0, "message": message})
        entry["count"] += 1
    return found


def burst(sim: Sim, seller: Node, buyers: list[Node], listings_n: int,
          at_once_per_buyer: int) -> dict[str, Any]:
    """Issue 26 item 6 over the simulated network: every buyer buys each of ``listings_n``
    listings of one seller, ``at_once_per_buyer`` at a time each; every purchase must
    complete and every balance move by exactly the prices paid."""
    listings = [sim.publish(seller, 1000 + n) for n in range(listings_n)]
    ids = [listing["listing_id"] for listing in listings]
    sim.listings_everywhere(ids, buyers, 120)
    traders = [seller, *buyers]
    before = {node.name: sim.usdc(node.info["wallet_address"]) for node in traders}

    def buy_all(buyer: Node) -> list[tuple[bool, float, str, int]]:
        token = (buyer.data_dir / "api.token").read_text().strip()
        # One client (thread-safe, pooled); its connections are opened by the pool's threads,
        # which are in the buyer's namespace.
        client = httpx.Client(base_url=f"http://127.0.0.1:{API_PORT}", timeout=180,
                              headers={"Authorization": f"Bearer {token}"})

        def one(listing_id: str) -> tuple[bool, float, str, int]:
            started = time.monotonic()
            # ``exact``: one transfer per purchase, so balances move by the prices paid.
            answer = client.post("/v1/purchases", json={
                "listing_id": listing_id, "max_price_micro_usdc": 1_000_000, "exact": True})
            spent = (time.monotonic() - started) * 1000
            if answer.status_code != 200:
                return False, spent, answer.text[:160], 0
            return True, spent, "", int(answer.json()["price_micro_usdc"])

        with client, ThreadPoolExecutor(at_once_per_buyer, initializer=enter_namespace,
                                        initargs=(buyer.ns,)) as pool:
            return list(pool.map(one, ids))

    with ThreadPoolExecutor(len(buyers)) as pool:
        results = dict(zip([b.name for b in buyers], pool.map(buy_all, buyers), strict=True))
    after = {node.name: sim.usdc(node.info["wallet_address"]) for node in traders}
    paid = {name: sum(row[3] for row in rows) for name, rows in results.items()}
    exact = (after[seller.name] - before[seller.name] == sum(paid.values()) and all(
        before[name] - after[name] == paid[name] for name in paid))
    rows = [row for found in results.values() for row in found]
    return {"ok": sum(row[0] for row in rows), "total": len(rows),
            "at_once": at_once_per_buyer * len(buyers),
            "duration_ms": quantiles([row[1] for row in rows if row[0]]),
            "errors": sorted({row[2] for row in rows if not row[0]})[:3], "balances_exact": exact}


def final_claims(sim: Sim, traders: list[Node], before: dict[str, int],
                 exact_moved: dict[str, int], voucher_paid: dict[tuple[str, str], int]) -> dict[str, Any]:
    """Every seller paid by voucher claims now (``POST /v1/market/claim``); then, from each
    node's ``wallet channels`` and the chain: each buyer's channel to a seller spent exactly
    the voucher prices it paid that seller (deposit − refundable), the seller claimed exactly
    that, and every trader's USDC moved by claimed − deposited ± its ``exact`` prices."""
    by_wallet = {node.info["wallet_address"].lower(): node.name for node in traders}
    mismatches: list[str] = []
    for name in sorted({seller for _, seller in voucher_paid}):
        node = next(n for n in traders if n.name == name)
        try:
            node.api("POST", "/v1/market/claim")
        except httpx.HTTPError as error:
            mismatches.append(f"{name}: market claim failed: {error!r}"[:200])
    channels = {node.name: node.api("GET", "/v1/wallet/channels") for node in traders}
    after = {node.name: sim.usdc(node.info["wallet_address"]) for node in traders}
    spent: dict[tuple[str, str], int] = {}
    claimed: dict[tuple[str, str], int] = {}
    deposited = refundable = income = 0
    for node in traders:
        paying, paid = channels[node.name]["paying"], channels[node.name]["paid_by"]
        node_deposits = node_claims = 0
        for channel in paying:
            pair = (node.name, by_wallet.get(channel["receiver"].lower(), channel["receiver"]))
            spent[pair] = channel["deposit_micro_usdc"] - channel["remaining_micro_usdc"]
            node_deposits += channel["deposit_micro_usdc"]
            refundable += channel["remaining_micro_usdc"]
        for channel in paid:
            pair = (by_wallet.get(channel["payer"].lower(), channel["payer"]), node.name)
            claimed[pair] = channel["claimed_micro_usdc"]
            node_claims += channel["claimed_micro_usdc"]
        deposited += node_deposits
        income += node_claims
        expected = node_claims - node_deposits + exact_moved[node.name]
        if after[node.name] - before[node.name] != expected:
            mismatches.append(f"{node.name}: usdc moved {after[node.name] - before[node.name]}, "
                              f"expected {expected} (claimed {node_claims}, deposited "
                              f"{node_deposits}, exact {exact_moved[node.name]})")
    for pair in sorted(set(voucher_paid) | set(spent) | set(claimed)):
        paid_here = voucher_paid.get(pair, 0)
        if not spent.get(pair, 0) == claimed.get(pair, 0) == paid_here:
            mismatches.append(f"{pair[0]}→{pair[1]}: paid {paid_here} by voucher, channel spent "
                              f"{spent.get(pair)}, seller claimed {claimed.get(pair)}")
    return {"balances_exact": not mismatches, "mismatches": mismatches[:6],
            "channels": len(spent), "deposited_micro_usdc": deposited,
            "claimed_micro_usdc": income, "refundable_micro_usdc": refundable,
            "paid_by_voucher_micro_usdc": sum(voucher_paid.values())}


def reach(node: Node) -> dict[str, Any]:
    """The node's reachability status (a node without it, from before issue 26: unknown)."""
    found: dict[str, Any] = node.api("GET", "/v1/status").get("reachability") or {
        "status": "unknown", "reservations": [], "relay": {}}
    return found


def measure(sim: Sim) -> dict[str, Any]:
    args = sim.args
    nodes = sim.nodes
    print(f"waiting for {len(nodes)} nodes to start and connect", file=sys.stderr)
    wait("every node up with a peer", lambda: all(
        node.api("GET", "/v1/status")["connected_peers"] >= 1 for node in nodes), 300, 2)
    public = [node for node in nodes if not node.nat]
    wait("public nodes with >= 3 peers (discovery)", lambda: all(
        node.api("GET", "/v1/status")["connected_peers"] >= 3 for node in public), 180, 2)
    peers = {node.name: node.api("GET", "/v1/status")["connected_peers"] for node in nodes}

    sellers = [node for node in nodes[2:] if not node.nat][: args.listings] + [
        node for node in nodes if node.nat]
    print(f"publishing {len(sellers)} listings ({args.nat} from NATed sellers)", file=sys.stderr)
    listings = {seller.name: sim.publish(seller, 1) for seller in sellers}
    nat_nodes = [s for s in sellers if s.nat]
    # With vouchers each (buyer, listing) pair buys ``--voucher-repeats`` times (the first
    # opens the channel, the rest pay by voucher): enough pairs for ``--purchases`` voucher
    # purchases of each kind. With ``exact`` every pair buys once.
    repeats = max(2, args.voucher_repeats) if args.scheme == "voucher" else 1
    per_kind = -(-args.purchases // (repeats - 1)) if repeats > 1 else args.purchases
    # Each NATed buyer can buy each other NATed seller's listings: enough listings for
    # ``per_kind`` NAT-to-NAT pairs (the first of each seller measures propagation).
    pairs_per_listing = max(1, len(nat_nodes) * (len(nat_nodes) - 1))
    per_seller = max(1, -(-per_kind // pairs_per_listing))
    more = {seller.name: [sim.publish(seller, n) for n in range(2, per_seller + 1)]
            for seller in nat_nodes}
    seller_of = {listing["listing_id"]: seller for seller in sellers
                 for listing in [listings[seller.name], *more.get(seller.name, [])]}
    ids = [listing["listing_id"] for listing in listings.values()]
    seen = sim.listings_everywhere(ids, nodes, 120)
    published = {listing["listing_id"]: seen[seller][listing["listing_id"]]
                 for seller, listing in listings.items() if listing["listing_id"] in seen[seller]}
    propagation = [at - published[lid] for name, found in seen.items() for lid, at in found.items()
                   if lid in published and listings.get(name, {}).get("listing_id") != lid]
    missing = len(ids) * (len(nodes) - 1) - len(propagation)

    extra_ids = [listing["listing_id"] for found in more.values() for listing in found]
    if extra_ids:
        sim.listings_everywhere(extra_ids, nat_nodes, 120)
    print("reachability: waiting for AutoNAT verdicts and relay reservations", file=sys.stderr)
    if "reachability" in nodes[0].api("GET", "/v1/status"):
        wait("NATed nodes private with a relay reservation", lambda: all(
            reach(node)["status"] == "private" and reach(node)["reservations"]
            for node in nat_nodes), 120, 2)
    reachability = {node.name: reach(node)["status"] for node in nodes}

    print("buying: public and NATed sellers, and NATed buyers from NATed sellers", file=sys.stderr)
    public_listings = [listings[s.name] for s in sellers if not s.nat]
    nat_listings = [listings[s.name] for s in sellers if s.nat]
    all_nat_listings = nat_listings + [listing for n in range(per_seller - 1)
                                       for listing in [more[s.name][n] for s in nat_nodes]]
    public_buyers = [node for node in public[1:]]

    def pairs(buyers: list[Node], offered: list[dict[str, Any]]) -> list[tuple[Node, dict[str, Any]]]:
        """``per_kind`` (buyer, listing) pairs, round robin, never a seller's own listing."""
        found = [(buyer, listing) for listing in offered for buyer in buyers
                 if seller_of[listing["listing_id"]] is not buyer]
        ordered: list[tuple[Node, dict[str, Any]]] = []
        by_buyer = {buyer.name: [pair for pair in found if pair[0] is buyer] for buyer in buyers}
        while len(ordered) < per_kind and any(by_buyer.values()):
            for name in list(by_buyer):
                if by_buyer[name] and len(ordered) < per_kind:
                    ordered.append(by_buyer[name].pop(0))
        return ordered

    pairs_plan = [(b, lst, "public_seller") for b, lst in pairs(public_buyers, public_listings)]
    pairs_plan += [(b, lst, "nat_seller") for b, lst in pairs(public_buyers, all_nat_listings)]
    # NAT to NAT: neither side can dial the other; a relay carries the first connection.
    pairs_plan += [(b, lst, "nat_to_nat") for b, lst in pairs(nat_nodes, all_nat_listings)]
    # Round r of every pair before round r + 1: a pair's purchases are sequential.
    plan = [(b, lst, kind, rounds > 0) for rounds in range(repeats) for b, lst, kind in pairs_plan]
    # Sellers buy too: every node's balance must move by exactly what it earned minus spent.
    traders = list({node.name: node for item in plan for node in (item[0], *sellers)}.values())
    before = {n.name: sim.usdc(n.info["wallet_address"]) for n in traders}
    outcomes: list[tuple[Bought, str, dict[str, Any], Node, bool]] = []
    # Waves in which each buyer buys once, so a purchase never waits for its buyer's previous one.
    waves: list[list[tuple[Node, dict[str, Any], str, bool]]] = []
    for item in plan:
        wave = next((w for w in waves if all(other[0] is not item[0] for other in w)), None)
        if wave is None:
            waves.append([item])
        else:
            wave.append(item)
    for wave in waves:
        with ThreadPoolExecutor(len(wave)) as pool:
            outcomes += list(pool.map(lambda item: (sim.buy(item[0], item[1], item[3]), item[2],
                                                    item[1], item[0], item[3]), wave))
    exact_moved = {n.name: 0 for n in traders}
    voucher_paid: dict[tuple[str, str], int] = {}
    for bought, _, listing, buyer, _ in outcomes:
        if bought.ok:
            seller = seller_of[listing["listing_id"]]
            if bought.scheme == "exact":
                exact_moved[seller.name] += bought.price
                exact_moved[buyer.name] -= bought.price
            else:
                pair = (buyer.name, seller.name)
                voucher_paid[pair] = voucher_paid.get(pair, 0) + bought.price
    print("final claims: every seller claims its vouchers, then balances", file=sys.stderr)
    balances = final_claims(sim, traders, before, exact_moved, voucher_paid)
    exact = balances["balances_exact"]

    # DCUtR: which NAT purchases' buyer-seller connections are direct once the upgrade had time.
    nat_rows = [row for row in outcomes if row[1] in ("nat_seller", "nat_to_nat") and row[0].ok]

    def direct(row: tuple[Any, ...]) -> bool:
        seller = seller_of[row[2]["listing_id"]]
        found = [p for p in row[3].api("GET", "/v1/peers")["peers"]
                 if p["peer_id"] == seller.info["peer_id"]]
        return bool(found) and found[0]["connected"] and not found[0].get("relayed", False)

    wait("NAT purchases on direct connections", lambda: all(direct(row) for row in nat_rows),
         args.dcutr_wait_s, 2)
    direct_share = (sum(direct(row) for row in nat_rows) / len(nat_rows)) if nat_rows else None
    relay_bytes = sum(int((reach(node).get("relay") or {}).get("relayed_bytes") or 0)
                      for node in nodes)

    def paid_by(row: tuple[Bought, str, dict[str, Any], Node, bool]) -> str:
        """``voucher``, ``first`` (carried a deposit: the channel-opening purchase, or a
        top-up) or ``exact``; a failed purchase by its place in the plan."""
        bought, again = row[0], row[4]
        if bought.ok:
            return "exact" if bought.scheme == "exact" else "first" if bought.deposit else "voucher"
        return "exact" if args.scheme == "exact" else "voucher" if again else "first"

    def figures(rows: list[tuple[Bought, str, dict[str, Any], Node, bool]]) -> dict[str, Any]:
        return {"ok": sum(row[0].ok for row in rows), "total": len(rows),
                "duration_ms": quantiles([row[0].ms for row in rows if row[0].ok]),
                "reasons": reason_counts([row[0].why for row in rows if not row[0].ok])}

    def summary(kind: str) -> dict[str, Any]:
        rows = [row for row in outcomes if row[1] == kind]
        return figures(rows) | {
            "errors": sorted({row[0].why[:120] for row in rows if not row[0].ok})[:3],
            **{scheme: figures([row for row in rows if paid_by(row) == scheme])
               for scheme in ("voucher", "first", "exact")}}

    # Before the weather drill: its lock-down rightly halts purchases from provisional sellers.
    burst_result: dict[str, Any] | None = None
    if args.burst:
        burst_seller = public[-1]
        burst_buyers = [node for node in nodes[1:] if node is not burst_seller][: args.burst_buyers]
        print(f"burst: {len(burst_buyers)} buyers x {args.burst} listings of {burst_seller.name}, "
              f"{args.burst_at_once} at once each", file=sys.stderr)
        burst_result = burst(sim, burst_seller, burst_buyers, args.burst, args.burst_at_once)

    print("weather: management broadcasts a lock-down", file=sys.stderr)
    lock, unlocked = sim.weather_lock()

    print("late joiner: a new node that knows one peer", file=sys.stderr)
    late = sim.late
    sim.spawn(late)
    wait("late joiner up", lambda: late.api("GET", "/v1/status")["connected_peers"] >= 1, 120, 1)
    joined = time.time() * 1000
    caught = sim.listings_everywhere(ids, [late], args.late_timeout_s)[late.name]
    catch_up = (max(caught.values()) - joined) if len(caught) == len(ids) else None

    restart = restart_refound(sim, args.restart_timeout_s)

    catalogue: dict[str, Any] = {"published": 0, "reached_all_nodes_s": None}
    if args.catalogue:
        print(f"catalogue: one public node publishes {args.catalogue} skills at once", file=sys.stderr)
        seller = nodes[2]
        started_s = time.monotonic()
        catalogued = sim.catalogue(seller, args.catalogue)
        publishing_s = time.monotonic() - started_s
        started_s = time.monotonic()
        seen = sim.listings_everywhere(catalogued, nodes, 120)
        everywhere = all(len(found) == len(catalogued) for found in seen.values())
        catalogue = {"published": len(catalogued),
                     "publish_s": round(publishing_s, 1),
                     "reached_all_nodes_s": round(time.monotonic() - started_s, 1) if everywhere else None,
                     "missing": sum(len(catalogued) - len(found) for found in seen.values())}

    purchases = {f"purchases_{kind}": summary(kind)
                 for kind in ("public_seller", "nat_seller", "nat_to_nat")}
    return {
        "restart_refound_s": restart,
        "burst": burst_result,
        "catalogue": catalogue,
        "nodes": len(nodes), "nat_nodes": args.nat, "nat_ports": args.nat_ports,
        "link_model": sim.link_model,
        "delay_ms": args.delay_ms, "jitter_ms": args.jitter_ms, "loss": args.loss,
        "peers_per_node": quantiles([float(v) for v in peers.values()]),
        "listing_propagation_ms": quantiles(propagation) | {"missing": missing},
        **purchases,
        "scheme": args.scheme, "voucher_repeats": repeats,
        "balances_exact": exact, "balances": balances,
        "voucher_targets_met": {
            kind: (purchases[kind]["voucher"]["duration_ms"].get("p50") or float("inf")) <= bound
            for kind, bound in (("purchases_public_seller", 250), ("purchases_nat_seller", 400))},
        "reachability": {state: sum(1 for v in reachability.values() if v == state)
                         for state in ("public", "private", "unknown")},
        "nat_nodes_private": all(reachability[n.name] == "private" for n in nat_nodes),
        "direct_after_dcutr": None if direct_share is None else round(direct_share, 3),
        "direct_after_dcutr_waited_s": args.dcutr_wait_s,
        "relay_bytes": relay_bytes,
        "weather_lock_ms": quantiles(lock) | {"missing": unlocked},
        "late_joiner": {"listings_seen": len(caught), "of": len(ids),
                        "catch_up_ms": None if catch_up is None else round(catch_up),
                        "waited_s": args.late_timeout_s},
    }


def restart_refound(sim: Sim, timeout_s: float) -> float | None:
    """A public node is killed (-9) and restarted on a new port: seconds until every peer that
    was connected to it is connected to it again (None: not within ``timeout_s``)."""
    victim = next(node for node in sim.nodes[2:] if not node.nat)
    peer_id = victim.info["peer_id"]
    knew = [node for node in sim.nodes if node is not victim and any(
        p["peer_id"] == peer_id and p["connected"] for p in node.api("GET", "/v1/peers")["peers"])]
    print(f"churn: {victim.name} killed and restarted on a new port ({len(knew)} peers knew it)",
          file=sys.stderr)
    sim.restart_on_new_port(victim, P2P_PORT + 1)
    started_s = time.monotonic()

    def refound() -> bool:
        # Asked of the new process (the old one's connections died with it): a connection is
        # both ends', so its peers list says which of the peers that knew it are back.
        connected = {p["peer_id"] for p in victim.api("GET", "/v1/peers")["peers"] if p["connected"]}
        return all(node.info["peer_id"] in connected for node in knew)

    if not wait("the restarted node re-found by every peer that knew it", refound, timeout_s, 0.5):
        return None
    return round(time.monotonic() - started_s, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=25)
    parser.add_argument("--nat", type=int, default=3)
    parser.add_argument("--listings", type=int, default=4, help="listings from public sellers")
    parser.add_argument("--purchases", type=int, default=20,
                        help="purchases of each kind (with vouchers: voucher purchases, besides "
                             "the channel-opening ones)")
    parser.add_argument("--scheme", choices=("voucher", "exact"), default="voucher",
                        help="voucher: x402 batch-settlement after a channel-opening purchase "
                             "(issue 36); exact: every purchase one on-chain transfer")
    parser.add_argument("--voucher-repeats", type=int, default=5,
                        help="purchases per (buyer, listing) pair with vouchers (1 opening)")
    parser.add_argument("--dcutr-wait-s", type=float, default=30.0,
                        help="how long NAT purchases' connections may take to become direct")
    parser.add_argument("--nat-ports", choices=("preserving", "random"), default="preserving",
                        help="random: NAT routers map every connection to a random port "
                             "(hole punching always fails; NAT to NAT goes over relays)")
    parser.add_argument("--delay-ms", type=float, default=40.0)
    parser.add_argument("--jitter-ms", type=float, default=10.0)
    parser.add_argument("--loss", type=float, default=0.01)
    parser.add_argument("--late-timeout-s", type=float, default=60.0)
    parser.add_argument("--catalogue", type=int, default=200,
                        help="skills one public node publishes at once (0: skip)")
    parser.add_argument("--restart-timeout-s", type=float, default=60.0)
    parser.add_argument("--burst", type=int, default=25,
                        help="listings of one seller each burst buyer buys (0: no burst)")
    parser.add_argument("--burst-buyers", type=int, default=4)
    parser.add_argument("--burst-at-once", type=int, default=5, help="purchases in flight per buyer")
    parser.add_argument("--keep", action="store_true", help="keep the data dirs (logs)")
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), nodes=6, nat=2, listings=1, purchases=1, late_timeout_s=30.0,
                 catalogue=20, burst=2, burst_buyers=2, burst_at_once=2)
    reason = why_not_available()
    if reason:
        print(f"sim_netem: skipped: {reason}", file=sys.stderr)
        print_result({"skipped": reason})
        return
    prefix = f"cm{os.getpid() % 100000}"
    topology = Topology(prefix, args.delay_ms, args.jitter_ms, args.loss,
                        kernel_netem=kernel_has_netem(f"{prefix}-probe"), nat_ports=args.nat_ports)
    root = Path(tempfile.mkdtemp(prefix="sim-netem-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    started = time.monotonic()
    try:
        topology.open()
        sim = Sim(args, topology, root)
        sim.build()
        result = measure(sim)
        # This script, plus every process it started (anvil, the nodes, the switch if any).
        result["processes"] = 1 + len(topology.processes)
        result["run_duration_s"] = round(time.monotonic() - started, 1)
    finally:
        topology.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"data dirs kept in {root}", file=sys.stderr)
    print(json.dumps(result, indent=2), file=sys.stderr)
    print_result(result)


if __name__ == "__main__":
    main()

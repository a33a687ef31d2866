"""Discrete-event simulation of crystalmesh at internet size: gossip meshes, the DHT, listings sync.

    .venv/bin/python scripts/sim_scale.py                       # 1,000 / 10,000 / 100,000 nodes
    .venv/bin/python scripts/sim_scale.py --cpu-ms-per-msg 1.0  # plug in an optimised build
    nice -n 10 .venv/bin/python scripts/sim_scale.py --validate 50   # + a real 50-process run

What is simulated, message by message (a heapq event queue, one traced message at a time):

- **Gossipsub meshes.** Every topic's subscribers form a mesh: each node grafts
  ``--degree`` (D) random subscribers; grafts it receives beyond ``--degree-high``
  are pruned back to D, and nodes left under ``--degree-low`` graft again (what a
  heartbeat converges to). A node that receives a message it has not seen pays
  the per-message CPU (``--cpu-ms-per-msg`` plus its queueing, below), then forwards
  it to every mesh peer but the one it came from; a duplicate is dropped by the
  seen-cache. **Gossip:** at each of its next ``--gossip-window`` heartbeats (a
  random phase per node, ``--heartbeat-s`` apart) a node that holds the message
  sends IHAVE to ``--d-lazy`` random non-mesh subscribers; one that lacks it
  answers IWANT and gets it one round trip later. Links: log-normal one-way delay
  (median ``--link-ms``).
- **Churn.** A fraction ``--offline`` of nodes is offline at any instant (sessions
  of mean ``--session-s``; the node set at a message is a fresh draw). Mesh slots
  pointing at offline nodes stay dead until the next heartbeat (within one
  message's propagation they are simply lost sends): gossip is what covers the
  holes. The delivery ratio is over the nodes online when the message is published.
- **DHT.** Kademlia over random 64-bit ids: k-buckets (k = ``--dht-k``) drawn from
  the id space (nodes sharing a prefix are a contiguous range of the sorted ids, so
  a table is built on demand and 100,000 nodes cost nothing up front); iterative
  lookups with ``--dht-alpha`` parallel queries, offline nodes time out
  (``--dht-timeout-ms``). Provider records sit on the k closest nodes; a find stops
  at the first node that holds the record. A buyer's network search = find
  providers of a category key, then one listings-sync page from up to
  ``--sync-sellers`` of them.
- **Per-message CPU queueing.** Each node is a single server whose background
  utilisation rho is its listing + weather traffic times the CPU per message; a
  traced message waits the M/D/1 mean wait rho*c / (2(1-rho)). rho >= 1 means the
  node cannot keep up: the run reports it (``overloaded``) and the message is late
  by the backlog growth over ``--backlog-s``. In ``--shared-cores`` mode (the
  validation run: all processes on one machine) every node's work instead goes
  through one FIFO pool of that many cores.

What is aggregated rather than simulated (so 100,000 nodes take minutes, not days):
per-node CPU and bytes per second are rates times costs, computed for **every**
node from its own subscriptions and mesh degree (numpy), reported as the mean and
the 99th percentile over nodes. Simulating every listing of a 100,000-node market
message by message would be ~10^10 events a simulated hour; the per-message
traces above give the propagation times and the duplicate factor the rates use.

Listing traffic, two designs:

- ``flood`` (today): every node is on ``/1/skills``; every announcement reaches
  everyone. Rate = nodes x ``--listings-per-node`` / ``--refresh-s``.
- ``sharded`` (docs/protocol.md, "Listings that do not flood"): a listing travels
  on ``/1/listings/<S>/<shard>`` with shard = H(category) mod S; a node follows the
  shards of ``--interests`` categories plus the ``--sells`` it sells in. S is the
  network's shard count, ``--nodes-per-shard`` nodes per shard (a power of two,
  at least 16; ``--fixed-shards`` shows what a fixed S does). Sellers keep
  provider records (category + ``--provider-tags`` tags) in the DHT, republished
  every 22 h; a buyer runs ``--queries-per-hour`` network searches. Every node also
  syncs listings with ``--sync-peers`` connected peers every 5 minutes, from a cursor
  per peer (``resync_entries``): with ``--sync-filter shards`` (the product,
  listings-sync/2) a peer sends only the listings of the shards the asking node
  follows, with ``none`` (listings-sync/1) those of every shard the peer follows.

Trust reports (one global topic, every report reaches every node): the old rule (every
``--trust-interval-s``) against the cadence of node/trust/cadence.py, computed with the
product's functions from each sampled sender's own DHT size estimate (``trust_traffic``).

The CPU figure is the measured cost of one listing per node (docs/benchmarks.md:
~4.5 ms per message per node on this machine, 10 processes, duplicates
included); pass the optimised build's figure with ``--cpu-ms-per-msg``. The JSON
records which was used. ``--smoke``: 300 and 600 nodes, 3 messages, seconds.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import random
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _bench import add_smoke_flag, percentile, print_result, process_cpu_s, smoke

from node.net.dht import dht_size_estimate
from node.trust import cadence

WORKER = Path(__file__).with_name("_gossip_worker.py")
INF = float("inf")
ID_BITS = 64


@dataclass
class Params:
    cpu_ms: float
    listing_bytes: int
    weather_bytes: int
    ihave_bytes_per_id: int
    degree: int
    degree_low: int
    degree_high: int
    d_lazy: int
    heartbeat_s: float
    gossip_window: int
    link_ms: float
    link_sigma: float
    offline: float
    backlog_s: float
    shared_cores: int


# ----------------------------------------------------------------------------- meshes
def build_mesh(members: np.ndarray, p: Params, rng: np.random.Generator,
               connect_to: list[list[int]] | None = None) -> list[list[int]]:
    """Mesh adjacency (indices into ``members``): D grafts each, pruned to D_hi, topped up to D_lo.

    ``connect_to[i]`` (the validation topology) restricts node i's candidates to its
    connections, as a real node can only graft peers it is connected to.
    """
    n = len(members)
    adjacency: list[set[int]] = [set() for _ in range(n)]
    if n <= 1:
        return [[] for _ in range(n)]

    def candidates(i: int, want: int) -> list[int]:
        if connect_to is not None:
            pool = [j for j in connect_to[i] if j != i and j not in adjacency[i]]
            rng.shuffle(pool)
            return pool[:want]
        picks = rng.integers(0, n, size=want * 2 + 2).tolist()
        return [j for j in dict.fromkeys(picks) if j != i and j not in adjacency[i]][:want]

    for i in range(n):
        for j in candidates(i, max(0, p.degree - len(adjacency[i]))):
            adjacency[i].add(j)
            adjacency[j].add(i)
    for i in range(n):  # heartbeat: prune the oversubscribed back to D (random victims)
        if len(adjacency[i]) > p.degree_high:
            victims = rng.permutation(sorted(adjacency[i]))[: len(adjacency[i]) - p.degree]
            for j in victims.tolist():
                if len(adjacency[j]) > p.degree_low:
                    adjacency[i].discard(j)
                    adjacency[j].discard(i)
    for i in range(n):  # heartbeat: graft back up when under D_lo
        if len(adjacency[i]) < p.degree_low:
            for j in candidates(i, p.degree - len(adjacency[i])):
                adjacency[i].add(j)
                adjacency[j].add(i)
    return [sorted(neighbours) for neighbours in adjacency]


# ----------------------------------------------------------------------------- propagation
class SharedCores:
    """One FIFO pool of CPU cores for all nodes (the validation run: one machine)."""

    def __init__(self, cores: int) -> None:
        self.free_at = [0.0] * cores

    def run(self, ready_s: float, cost_s: float) -> float:
        start = max(ready_s, heapq.heappop(self.free_at))
        done = start + cost_s
        heapq.heappush(self.free_at, done)
        return done


def propagate(mesh: list[list[int]], online: np.ndarray, source: int, p: Params,
              wait_s: np.ndarray, rng: random.Random, cpu_s: float | None = None,
              shared: SharedCores | None = None) -> np.ndarray:
    """Times (s) at which each node's handler has the message; inf if never (within gossip).

    Events: (time, seq, kind, node, sender). ``RECV``: the message reaches ``node``;
    ``DONE``: validated, delivered and forwarded; ``IHAVE``: ``node`` advertises it.
    """
    n = len(mesh)
    cost = p.cpu_ms / 1000 if cpu_s is None else cpu_s
    link = p.link_ms / 1000
    sigma = p.link_sigma
    lognormal = rng.lognormvariate
    delivered = np.full(n, INF)
    seen = np.zeros(n, dtype=bool)
    phase = [rng.random() * p.heartbeat_s for _ in range(n)] if p.gossip_window else []
    remaining = int(online.sum()) - (1 if online[source] else 0)
    events: list[tuple[float, int, int, int, int]] = []
    counter = 0
    recv, done_kind, ihave = 0, 1, 2
    seen[source] = True
    heapq.heappush(events, (0.0, 0, done_kind, source, -1))
    delivered[source] = 0.0
    online_list = np.flatnonzero(online)
    while events and remaining > 0:
        now, _, kind, node, sender = heapq.heappop(events)
        if kind == recv:
            if seen[node] or not online[node]:
                continue
            seen[node] = True
            finish = shared.run(now, cost) if shared is not None else now + cost + wait_s[node]
            counter += 1
            heapq.heappush(events, (finish, counter, done_kind, node, sender))
        elif kind == done_kind:
            if node != source:
                delivered[node] = now
                remaining -= 1
            for peer in mesh[node]:
                if peer != sender:
                    counter += 1
                    heapq.heappush(events, (now + link * lognormal(0, sigma), counter, recv, peer, node))
            if p.gossip_window:
                beat = phase[node] + p.heartbeat_s * math.ceil((now - phase[node]) / p.heartbeat_s)
                for window in range(p.gossip_window):
                    counter += 1
                    heapq.heappush(events, (beat + window * p.heartbeat_s, counter, ihave, node, -1))
        else:  # IHAVE to d_lazy random topic members; a node lacking it IWANTs it.
            for _ in range(p.d_lazy):
                peer = int(online_list[rng.randrange(len(online_list))]) if len(online_list) else node
                if peer == node or seen[peer]:
                    continue
                # IHAVE there, IWANT back, the message there: three one-way delays.
                arrival = now + sum(link * lognormal(0, sigma) for _ in range(3))
                counter += 1
                heapq.heappush(events, (arrival, counter, recv, peer, node))
    return delivered


def queue_wait_s(rho: np.ndarray, cost_s: float, backlog_s: float) -> np.ndarray:
    """M/D/1 mean wait for a node at utilisation rho; past saturation, the backlog growth."""
    rho = np.asarray(rho, dtype=float)
    wait = np.where(rho < 1, rho * cost_s / (2 * np.maximum(1e-9, 1 - rho)), 0.0)
    return np.where(rho < 1, wait, (rho - 1) * backlog_s + cost_s)


def latency_stats(runs: list[np.ndarray], onlines: list[np.ndarray], sources: list[int]) -> dict[str, Any]:
    """Per reception p50/p99 (ms), 99 %-coverage time p50/p99 over messages, delivery ratio."""
    receptions: list[float] = []
    coverage: list[float] = []
    delivered = 0
    expected = 0
    for times, online, source in zip(runs, onlines, sources, strict=True):
        mask = online.copy()
        mask[source] = False
        got = times[mask]
        finite = got[np.isfinite(got)]
        receptions.extend((finite * 1000).tolist())
        delivered += len(finite)
        expected += int(mask.sum())
        if mask.sum():
            ordered = np.sort(np.where(np.isfinite(got), got, INF))
            index = max(0, math.ceil(0.99 * len(ordered)) - 1)
            coverage.append(float(ordered[index]) * 1000)
    finite_cov = [c for c in coverage if math.isfinite(c)]
    return {
        "p50_ms": round(percentile(receptions, 50), 1),
        "p99_ms": round(percentile(receptions, 99), 1),
        "t99_p50_ms": round(percentile(finite_cov, 50), 1) if finite_cov else None,
        "t99_p99_ms": round(percentile(finite_cov, 99), 1) if len(finite_cov) == len(coverage) else None,
        "delivery_ratio": round(delivered / expected, 5) if expected else None,
    }


# ----------------------------------------------------------------------------- DHT
class Kademlia:
    """Random 64-bit ids; k-buckets drawn on demand from the sorted id space."""

    def __init__(self, n: int, k: int, alpha: int, rng: np.random.Generator) -> None:
        self.ids = np.sort(rng.integers(0, 2**63 - 1, size=n, dtype=np.int64).astype(np.uint64) * 2)
        self.k = k
        self.alpha = alpha
        self.rng = rng
        self.tables: dict[int, np.ndarray] = {}

    def table(self, node: int) -> np.ndarray:
        cached = self.tables.get(node)
        if cached is not None:
            return cached
        me = int(self.ids[node])
        rows = []
        for bit in range(ID_BITS):
            # Peers whose ids share ``bit`` leading bits with ours and differ at the next one.
            shift = ID_BITS - bit - 1
            prefix = ((me >> shift) ^ 1) << shift
            low = np.searchsorted(self.ids, np.uint64(prefix), side="left")
            high = np.searchsorted(self.ids, np.uint64(prefix + (1 << shift) - 1), side="right")
            if high > low:
                count = min(self.k, high - low)
                rows.append(self.rng.choice(np.arange(low, high), size=count, replace=False))
            if bit > 40:
                break
        table = np.concatenate(rows) if rows else np.array([], dtype=np.int64)
        if len(self.tables) < 200_000:
            self.tables[node] = table
        return table

    def closest(self, key: int, count: int) -> np.ndarray:
        """The ``count`` ids closest to ``key`` by XOR (global knowledge: where records live)."""
        position = int(np.searchsorted(self.ids, np.uint64(key)))
        window = np.arange(max(0, position - 4 * count), min(len(self.ids), position + 4 * count))
        distances = self.ids[window] ^ np.uint64(key)
        return window[np.argsort(distances)[:count]]

    def lookup(self, start: int, key: int, online: np.ndarray, holders: set[int] | None,
               rtt_s: float, timeout_s: float) -> tuple[float, int, bool]:
        """Iterative lookup: (seconds, queries sent, found a provider record).

        Kademlia's: keep the k closest peers heard of, query the alpha closest not yet
        asked, in rounds (a round lasts its slowest answer; an offline peer, the
        timeout); stop when the k closest have all been asked, or at a record holder.
        """
        key_u = np.uint64(key)

        def distance(node: int) -> int:
            return int(self.ids[node] ^ key_u)

        known = {int(x): distance(int(x)) for x in self.table(start)}
        queried: set[int] = {start}
        elapsed = 0.0
        queries = 0
        while True:
            closest = sorted(known, key=known.__getitem__)[: self.k]
            candidates = [c for c in closest if c not in queried][: self.alpha]
            if not candidates:
                return elapsed, queries, False
            round_s = 0.0
            for node in candidates:
                queried.add(node)
                queries += 1
                if not online[node]:
                    round_s = max(round_s, timeout_s)
                    known.pop(node, None)
                    continue
                round_s = max(round_s, rtt_s)
                if holders is not None and node in holders:
                    return elapsed + round_s, queries, True
                for peer in self.table(node).tolist():
                    if peer not in known and peer not in queried:
                        known[peer] = distance(peer)
            elapsed += round_s
            if len(known) > 4 * self.k:  # only the closest matter from here on
                known = dict(sorted(known.items(), key=lambda item: item[1])[: 2 * self.k])


# ----------------------------------------------------------------------------- one size
def trust_traffic(nodes: int, dht: Kademlia, args: argparse.Namespace, p: Params,
                  rng: np.random.Generator) -> dict[str, Any]:
    """Trust reports received per node: every node's report reaches every node (one global topic).

    Old rule: every node every ``--trust-interval-s``. New rule (node/trust/cadence.py, the
    product's own functions): each sender estimates N from its own DHT routing table
    (``node.net.dht.dht_size_estimate`` over the simulated tables), publishes at most once per
    ``I = clamp(N_est / target, floor, ceiling)``, then at the first material change of its
    row (Poisson, ``--trust-changes-per-hour``) or at the refresh ``R = max(I, refresh)``:
    a cycle of ``I + (1 - exp(-lambda (R - I))) / lambda`` seconds. The last report survives a
    restart, so churn adds nothing; offline senders are counted as online (an upper bound).
    """
    per_msg_bytes = 2 * (p.degree - 1) * args.trust_bytes + 2 * p.gossip_window * p.d_lazy * p.ihave_bytes_per_id
    old_rate = nodes / args.trust_interval_s
    senders = rng.choice(nodes, size=min(nodes, args.trust_senders), replace=False)
    changes_per_s = args.trust_changes_per_hour / 3600
    estimates, intervals, rates = [], [], []
    for sender in senders.tolist():
        own = (int(dht.ids[sender]) << 192).to_bytes(32, "big")
        keys = [(int(dht.ids[peer]) << 192).to_bytes(32, "big") for peer in dht.table(sender).tolist()]
        estimate = dht_size_estimate(own, keys, args.dht_k)
        interval = cadence.report_interval_s(estimate, args.trust_interval_s, args.trust_target_per_s,
                                             args.trust_max_interval_s)
        refresh = cadence.refresh_interval_s(interval, args.trust_refresh_s)
        wait = ((1 - math.exp(-changes_per_s * (refresh - interval))) / changes_per_s
                if changes_per_s > 0 else refresh - interval)
        estimates.append(estimate)
        intervals.append(interval)
        rates.append(1 / (interval + wait))
    new_rate = nodes * float(np.mean(rates))

    def figures(rate: float) -> dict[str, float]:
        return {"msgs_per_s": round(rate, 3), "cpu_ms_per_s": round(rate * p.cpu_ms, 2),
                "bytes_per_s": round(rate * per_msg_bytes)}

    return {"old": figures(old_rate), "new": figures(new_rate) | {
        "size_estimate_p10_p50_p90": [round(percentile(estimates, q)) for q in (10, 50, 90)],
        "interval_s_p50": round(percentile(intervals, 50), 1)}}


def shard_count(nodes: int, nodes_per_shard: int) -> int:
    return max(16, 1 << max(0, math.ceil(math.log2(max(1, nodes / nodes_per_shard)))))


def resync_entries(follows: np.ndarray, shards: int, sync_peers: int, shard_rate: float,
                   rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Listings per second each node receives from its periodic syncs, per design.

    A node syncs with ``sync_peers`` connected peers every ``resync_s`` from a cursor per
    peer, so each peer sends every listing that changed since: the rate does not depend on
    ``resync_s``. A node's connections are its shards' meshes, so each peer is a random
    member of one of the node's shards. A peer holds the listings of the shards it follows.
    ``unfiltered`` (listings-sync/1, and /2 without a scope): the peer sends the changes of
    all its shards. ``filtered`` (listings-sync/2 with the shards the node follows,
    node/net/listing_sync.py): only those of the shards both follow. Entries the node holds
    already (gossip brought them) are dropped after their signature check, so every entry
    costs CPU.
    """
    nodes, width = follows.shape
    flat = follows.ravel()
    order = np.argsort(flat, kind="stable")
    members = np.repeat(np.arange(nodes), width)[order]
    starts = np.searchsorted(flat[order], np.arange(shards))
    sizes = np.bincount(flat, minlength=shards)
    # One row per (node, sync peer): a shard of the node, then a random member of it.
    asking = np.repeat(np.arange(nodes), sync_peers)
    shard = follows[asking, rng.integers(0, width, size=asking.size)]
    peer = members[starts[shard] + (rng.random(asking.size) * sizes[shard]).astype(np.int64)]
    mine, theirs = follows[asking], follows[peer]
    # Distinct shards of a row: a value counts where it first appears in the row.
    first = np.ones_like(mine, dtype=bool)
    first_theirs = np.ones_like(theirs, dtype=bool)
    for column in range(1, width):
        first[:, column] = (mine[:, :column] != mine[:, column:column + 1]).all(axis=1)
        first_theirs[:, column] = (theirs[:, :column] != theirs[:, column:column + 1]).all(axis=1)
    shared = (first & (mine[:, :, None] == theirs[:, None, :]).any(axis=2)).sum(axis=1)
    unfiltered = first_theirs.sum(axis=1)
    shared[peer == asking] = 0  # drew itself: no such session
    unfiltered[peer == asking] = 0
    return {
        "filtered": np.bincount(asking, weights=shared * shard_rate, minlength=nodes),
        "unfiltered": np.bincount(asking, weights=unfiltered * shard_rate, minlength=nodes),
    }


def simulate(nodes: int, args: argparse.Namespace, p: Params, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    cost_s = p.cpu_ms / 1000
    # --- rates (messages/s) -------------------------------------------------------------
    flood_rate = nodes * args.listings_per_node / args.refresh_s
    weather_rate = args.weather_per_hour / 3600
    shards = args.fixed_shards or shard_count(nodes, args.nodes_per_shard)
    follows = rng.integers(0, shards, size=(nodes, args.interests + args.sells))
    shard_sizes = np.bincount(follows.ravel(), minlength=shards)
    shard_rate = flood_rate / shards  # uniform hash of categories over shards
    distinct = np.array([len(set(row)) for row in follows.tolist()])
    # Subscriptions overlap at random: each node pays for its distinct shards.
    sharded_rate = distinct * shard_rate
    gossip_bytes = 2 * (p.degree - 1)  # sent + received copies per message per node (mean)
    ihave_bytes = 2 * p.gossip_window * p.d_lazy * p.ihave_bytes_per_id
    per_msg_bytes = gossip_bytes * p.listing_bytes + ihave_bytes
    # --- DHT: provider republish + buyer searches, issued and served (symmetric) ---------
    dht = Kademlia(nodes, args.dht_k, args.dht_alpha, rng)
    online_now = rng.random(nodes) >= p.offline
    lookups: list[float] = []
    queries: list[int] = []
    search_s: list[float] = []
    found = 0
    rtt = 2 * p.link_ms / 1000
    for _ in range(args.lookups):
        start = int(rng.choice(np.flatnonzero(online_now)))
        key = int(rng.integers(0, 2**63 - 1)) * 2
        holders = {int(h) for h in dht.closest(key, args.dht_k) if online_now[h]}
        seconds, sent, hit = dht.lookup(start, key, online_now, holders, rtt, args.dht_timeout_ms / 1000)
        lookups.append(seconds * 1000)
        queries.append(sent)
        found += hit
        # Then one sync page from each of up to sync_sellers providers, in parallel.
        page_s = rtt + args.sync_page_entries * cost_s + args.sync_page_bytes / args.bandwidth_bytes_s
        search_s.append((seconds + page_s) * 1000)
    mean_queries = float(np.mean(queries))
    dht_msg_bytes = 1200  # a FIND_NODE / GET_PROVIDERS answer with 20 peers
    provide_per_s = args.provider_keys / (22 * 3600)
    provide_msgs = provide_per_s * (mean_queries + args.dht_k)
    search_per_s = args.queries_per_hour / 3600
    search_msgs = search_per_s * mean_queries
    sync_bytes_per_s = search_per_s * args.sync_sellers * args.sync_page_bytes
    sync_cpu_per_s = search_per_s * args.sync_sellers * args.sync_page_entries * p.cpu_ms
    # Periodic listings sync with connected peers (every resync_s, from each peer's cursor).
    resync = resync_entries(follows, shards, args.sync_peers, shard_rate, rng)
    resync_per_node = resync["filtered" if args.sync_filter == "shards" else "unfiltered"]
    sync_cpu_per_s = sync_cpu_per_s + resync_per_node * p.cpu_ms
    sync_bytes_per_s = sync_bytes_per_s + resync_per_node * p.listing_bytes
    dht_msgs = 2 * (provide_msgs + search_msgs)  # issued + served by others, symmetric
    dht_bytes = dht_msgs * dht_msg_bytes + 2 * sync_bytes_per_s
    dht_cpu_ms = dht_msgs * args.dht_cpu_ms + sync_cpu_per_s
    # --- per node, both designs ------------------------------------------------------------
    weather_cpu = weather_rate * p.cpu_ms
    flood = {
        "msgs_per_s": round(flood_rate, 3),
        "cpu_ms_per_s": round(flood_rate * p.cpu_ms, 3),
        "bytes_per_s": round(flood_rate * per_msg_bytes),
    }
    sharded_cpu = sharded_rate * p.cpu_ms + dht_cpu_ms
    sharded_bytes = sharded_rate * per_msg_bytes + dht_bytes
    sharded = {
        "shards": shards,
        "subscribers_per_shard_mean": round(float(shard_sizes.mean()), 1),
        "msgs_per_s": round(float(sharded_rate.mean()), 4),
        "dht_msgs_per_s": round(dht_msgs, 4),
        "sync_filter": args.sync_filter,
        "resync_entries_per_s": round(float(resync_per_node.mean()), 4),
        "resync_entries_per_s_filtered": round(float(resync["filtered"].mean()), 4),
        "resync_entries_per_s_unfiltered": round(float(resync["unfiltered"].mean()), 4),
        "cpu_ms_per_s": round(float(sharded_cpu.mean()), 3),
        "cpu_ms_per_s_p99": round(float(np.percentile(sharded_cpu, 99)), 3),
        "bytes_per_s": round(float(sharded_bytes.mean())),
        "bytes_per_s_p99": round(float(np.percentile(sharded_bytes, 99))),
    }
    # --- propagation traces -----------------------------------------------------------------
    everyone = np.arange(nodes)
    global_mesh = build_mesh(everyone, p, rng)
    rho_flood = np.full(nodes, (flood_rate + weather_rate) * cost_s)
    rho_sharded = (sharded_rate + weather_rate) * cost_s + dht_cpu_ms / 1000
    traces: dict[str, Any] = {}
    for name, rho, mesh_for in (("weather", rho_sharded, None), ("listing_flood", rho_flood, None),
                                ("listing_sharded", rho_sharded, "shard")):
        runs, onlines, sources = [], [], []
        for message in range(args.messages):
            if mesh_for == "shard":
                shard = message % shards
                members = np.flatnonzero((follows == shard).any(axis=1))
                mesh = build_mesh(members, p, rng)
                member_rho = rho[members]
            else:
                members, mesh, member_rho = everyone, global_mesh, rho
            online = rng.random(len(members)) >= p.offline
            source = int(rng.choice(np.flatnonzero(online))) if online.any() else 0
            online[source] = True
            wait = queue_wait_s(member_rho, cost_s, p.backlog_s)
            runs.append(propagate(mesh, online, source, p, wait, prng))
            onlines.append(online)
            sources.append(source)
        traces[name] = latency_stats(runs, onlines, sources)
    overloaded_flood = bool(rho_flood.max() >= 1)
    return {
        "nodes": nodes,
        "listing_flood": flood | {"rho": round(float(rho_flood.mean()), 3),
                                  "overloaded": overloaded_flood} | traces["listing_flood"],
        "listing_sharded": sharded | {"rho": round(float(rho_sharded.mean()), 4)}
        | traces["listing_sharded"],
        "weather": traces["weather"] | {"cpu_ms_per_s": round(weather_cpu, 4)},
        "trust": trust_traffic(nodes, dht, args, p, rng),
        "dht": {"lookup_p50_ms": round(percentile(lookups, 50), 1),
                "lookup_p99_ms": round(percentile(lookups, 99), 1),
                "queries_mean": round(mean_queries, 2),
                "provider_found_ratio": round(found / max(1, args.lookups), 3),
                "network_search_p50_ms": round(percentile(search_s, 50), 1),
                "network_search_p99_ms": round(percentile(search_s, 99), 1)},
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


# ----------------------------------------------------------------------------- validation
class Worker:
    def __init__(self, index: int, bootstrap: list[str]) -> None:
        self.index = index
        self.process = subprocess.Popen(
            ["nice", "-n", "10", sys.executable, str(WORKER), "--bootstrap", ",".join(bootstrap)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def expect(self, event: str, timeout_s: float = 120.0) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"worker {self.index}: no {event!r} in {timeout_s} s")
            ready, _, _ = select.select([self.process.stdout], [], [], remaining)
            if not ready:
                continue
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"worker {self.index} exited ({self.process.poll()})")
            message = json.loads(line)
            if message.get("event") == event:
                return message

    def close(self) -> None:
        try:
            self.process.wait(timeout=10)
        except Exception:
            self.process.kill()


def validate(workers: int, args: argparse.Namespace, p: Params) -> dict[str, Any]:
    """A real run of ``workers`` gossip processes vs the simulation of the same topology."""
    prng = random.Random(7)
    nodes: list[Worker] = []
    addrs: list[str] = []
    try:
        # Started in waves (a busy machine takes a minute per process otherwise); each node
        # dials up to 4 random nodes of earlier waves, and discovery finds the rest.
        wave = 0
        while len(nodes) < workers:
            size = 1 if wave == 0 else min(args.wave, workers - len(nodes))
            ready = len(nodes)
            batch = [Worker(ready + i, prng.sample(addrs, min(4, ready))) for i in range(size)]
            for node in batch:
                addrs.append(node.expect("ready", timeout_s=600)["addr"])
                nodes.append(node)
            wave += 1
        deadline = time.monotonic() + args.mesh_wait_s
        while time.monotonic() < deadline:
            for node in nodes:
                node.send({"cmd": "status"})
            meshes = [node.expect("status")["mesh"] for node in nodes]
            if min(meshes) >= 1 and sum(meshes) / len(meshes) >= min(p.degree_low, 3):
                break
            time.sleep(2)
        for node in nodes:
            node.send({"cmd": "status"})
        statuses = [node.expect("status") for node in nodes]
        cpu_before = 0.0
        for node in nodes:
            node.send({"cmd": "report", "phase": -1})
            node.expect("report")
            cpu_before += process_cpu_s(node.process.pid)  # `nice` execs the worker: same pid
        count = args.validate_messages
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        nodes[0].send({"cmd": "publish", "phase": 1, "rate": args.validate_rate, "count": count})
        nodes[0].expect("published", timeout_s=count / args.validate_rate + 60)
        time.sleep(args.drain_s)
        wall_s = time.monotonic() - started
        receptions: list[float] = []
        per_message: dict[int, list[float]] = {}
        cpu_after = 0.0
        for node in nodes:
            node.send({"cmd": "report", "phase": 1})
            report = node.expect("report")
            cpu_after += process_cpu_s(node.process.pid)
            if node is nodes[0]:
                continue  # the publisher hands its own sellers' listings to itself too
            for index, latency_us in report["received"]:
                receptions.append(latency_us / 1000)
                per_message.setdefault(index, []).append(latency_us / 1000)
    finally:
        for node in nodes:  # all told at once, then waited for: a loaded machine is slow to exit
            try:
                node.send({"cmd": "quit"})
            except Exception:
                pass
        for node in nodes:
            node.close()
    delivered = len(receptions) / ((workers - 1) * count)
    cpu_ms_per_msg_node = (cpu_after - cpu_before) * 1000 / count / workers
    all_received = [max(v) for v in per_message.values() if len(v) == workers - 1]
    # What the run used of the machine while other work ran beside it: CPU / wall time.
    effective_cores = (cpu_after - cpu_before) / wall_s
    measured = {"p50_ms": round(percentile(receptions, 50), 1),
                "p99_ms": round(percentile(receptions, 99), 1),
                "all_p50_ms": round(percentile(all_received, 50), 1),
                "all_p99_ms": round(percentile(all_received, 99), 1),
                "delivered_fraction": round(delivered, 4),
                "cpu_ms_per_msg_per_node": round(cpu_ms_per_msg_node, 2),
                "mesh_mean": round(sum(x["mesh"] for x in statuses) / workers, 1),
                "peers_mean": round(sum(x["peers"] for x in statuses) / workers, 1),
                "load_average_before": round(load_before, 1),
                "effective_cores": round(effective_cores, 2)}
    # The same topology simulated: 2 shared cores, loopback links, the measured CPU per message.
    mesh_params = Params(**{**p.__dict__, "link_ms": 0.1, "link_sigma": 0.3, "offline": 0.0,
                            "shared_cores": args.cores})
    simulated: dict[str, Any] = {}
    # Each node is connected to most others (discovery): meshes are drawn among all of them.
    # "measured_share": the measured CPU through one core running at the share of the machine
    # the run got (CPU used / wall time; other engineers' work ran beside it).
    share = max(0.05, effective_cores)
    variants = (("calibrated", p.cpu_ms, args.cores), ("measured_cpu", cpu_ms_per_msg_node, args.cores),
                ("measured_share", cpu_ms_per_msg_node / share, 1))
    for label, cpu_ms, cores in variants:
        sim_rng = np.random.default_rng(11)
        sim_prng = random.Random(11)
        mesh = build_mesh(np.arange(workers), mesh_params, sim_rng)
        shared = SharedCores(cores)
        sims: list[float] = []
        alls: list[float] = []
        interval = 1 / args.validate_rate
        online = np.ones(workers, dtype=bool)
        for message in range(count):
            # Messages overlap at the publish rate: one shared-core pool across them.
            start = message * interval
            times = propagate(mesh, online, 0, mesh_params, np.zeros(workers), sim_prng,
                              cpu_s=cpu_ms / 1000, shared=_offset(shared, start))
            sims.extend((times[1:] * 1000).tolist())
            alls.append(float(times[1:].max()) * 1000)
        simulated[label] = {"cpu_ms": round(cpu_ms, 2), "cores": cores,
                            "p50_ms": round(percentile(sims, 50), 1),
                            "p99_ms": round(percentile(sims, 99), 1),
                            "all_p50_ms": round(percentile(alls, 50), 1),
                            "all_p99_ms": round(percentile(alls, 99), 1)}
    return {"workers": workers, "rate": args.validate_rate, "messages": count,
            "cores": args.cores, "measured": measured, "simulated": simulated}


class _offset(SharedCores):
    """The shared pool seen from a message published ``start`` seconds into the run."""

    def __init__(self, pool: SharedCores, start: float) -> None:
        self.pool = pool
        self.start = start

    def run(self, ready_s: float, cost_s: float) -> float:
        return self.pool.run(ready_s + self.start, cost_s) - self.start


# ----------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1000,10000,100000")
    parser.add_argument("--cpu-ms-per-msg", type=float, default=4.5,
                        help="CPU per listing per node (docs/benchmarks.md; today ~4.5)")
    parser.add_argument("--dht-cpu-ms", type=float, default=0.5,
                        help="CPU per DHT request or answer (no envelope signature to check)")
    parser.add_argument("--listing-bytes", type=int, default=900, help="envelope + pubsub framing")
    parser.add_argument("--weather-bytes", type=int, default=450)
    parser.add_argument("--ihave-bytes-per-id", type=int, default=34)
    parser.add_argument("--degree", type=int, default=6)
    parser.add_argument("--degree-low", type=int, default=4)
    parser.add_argument("--degree-high", type=int, default=12)
    parser.add_argument("--d-lazy", type=int, default=6)
    parser.add_argument("--heartbeat-s", type=float, default=1.0)
    parser.add_argument("--gossip-window", type=int, default=3)
    parser.add_argument("--link-ms", type=float, default=40.0, help="median one-way delay")
    parser.add_argument("--link-sigma", type=float, default=0.6, help="log-normal shape")
    parser.add_argument("--offline", type=float, default=0.1, help="fraction offline (churn)")
    parser.add_argument("--session-s", type=float, default=3600.0)
    parser.add_argument("--backlog-s", type=float, default=10.0)
    parser.add_argument("--listings-per-node", type=float, default=10.0)
    parser.add_argument("--refresh-s", type=float, default=3600.0)
    parser.add_argument("--weather-per-hour", type=float, default=1.0)
    parser.add_argument("--trust-interval-s", type=float, default=10.0,
                        help="the old rule's interval, and the new rule's floor")
    parser.add_argument("--trust-target-per-s", type=float, default=1.0,
                        help="trust reports each node should receive per second (new rule)")
    parser.add_argument("--trust-max-interval-s", type=float, default=7 * 86_400.0)
    parser.add_argument("--trust-refresh-s", type=float, default=1800.0)
    parser.add_argument("--trust-changes-per-hour", type=float, default=1.0,
                        help="material (>= 5 %%, L1) changes of a node's trust row per hour")
    parser.add_argument("--trust-bytes", type=int, default=1000,
                        help="a trust report on the wire (~20 entries; 256 entries: ~9.8 kB)")
    parser.add_argument("--trust-senders", type=int, default=500,
                        help="senders whose size estimate and cadence are sampled")
    parser.add_argument("--interests", type=int, default=2)
    parser.add_argument("--sells", type=int, default=1)
    parser.add_argument("--nodes-per-shard", type=int, default=64)
    parser.add_argument("--fixed-shards", type=int, default=0, help="a fixed S instead")
    parser.add_argument("--provider-keys", type=int, default=5, help="category + tags per seller")
    parser.add_argument("--queries-per-hour", type=float, default=1.0)
    parser.add_argument("--sync-sellers", type=int, default=5)
    parser.add_argument("--sync-peers", type=int, default=8,
                        help="connected peers synced every 5 min")
    parser.add_argument("--sync-filter", choices=("shards", "none"), default="shards",
                        help="periodic sync asks only for followed shards (listings-sync/2, "
                             "the product) or for everything (listings-sync/1)")
    parser.add_argument("--sync-page-entries", type=int, default=32)
    parser.add_argument("--sync-page-bytes", type=int, default=32 * 900)
    parser.add_argument("--bandwidth-bytes-s", type=float, default=2_500_000)
    parser.add_argument("--dht-k", type=int, default=20)
    parser.add_argument("--dht-alpha", type=int, default=3)
    parser.add_argument("--dht-timeout-ms", type=float, default=1000.0)
    parser.add_argument("--lookups", type=int, default=200)
    parser.add_argument("--messages", type=int, default=12, help="traced messages per kind")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--validate", type=int, default=0, help="real gossip processes (0: none)")
    parser.add_argument("--validate-messages", type=int, default=40)
    parser.add_argument("--validate-rate", type=float, default=2.0)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--wave", type=int, default=10, help="workers started at once")
    parser.add_argument("--mesh-wait-s", type=float, default=90.0)
    parser.add_argument("--drain-s", type=float, default=10.0)
    add_smoke_flag(parser)
    args = smoke(parser.parse_args(), nodes="300,600", messages=3, lookups=20)
    p = Params(cpu_ms=args.cpu_ms_per_msg, listing_bytes=args.listing_bytes,
               weather_bytes=args.weather_bytes, ihave_bytes_per_id=args.ihave_bytes_per_id,
               degree=args.degree, degree_low=args.degree_low, degree_high=args.degree_high,
               d_lazy=args.d_lazy, heartbeat_s=args.heartbeat_s, gossip_window=args.gossip_window,
               link_ms=args.link_ms, link_sigma=args.link_sigma, offline=args.offline,
               backlog_s=args.backlog_s, shared_cores=0)
    sizes = [int(size) for size in args.nodes.split(",")]
    results = []
    for size in sizes:
        result = simulate(size, args, p, args.seed)
        print(json.dumps(result), file=sys.stderr, flush=True)
        results.append(result)
    base = results[0]["listing_sharded"]
    summary: dict[str, Any] = {
        "cpu_ms_per_msg": args.cpu_ms_per_msg,
        "sizes": results,
        "sharded_vs_smallest": {
            str(r["nodes"]): {
                "cpu_ratio": round(r["listing_sharded"]["cpu_ms_per_s"] / base["cpu_ms_per_s"], 2),
                "bytes_ratio": round(r["listing_sharded"]["bytes_per_s"] / base["bytes_per_s"], 2)}
            for r in results},
        "weather_t99_p99_ms": {str(r["nodes"]): r["weather"]["t99_p99_ms"] for r in results},
        "trust_old_vs_new": {str(r["nodes"]): {rule: r["trust"][rule] for rule in ("old", "new")}
                             for r in results},
    }
    if args.validate:
        summary["validation"] = validate(args.validate, args, p)
    print_result(summary)


if __name__ == "__main__":
    main()

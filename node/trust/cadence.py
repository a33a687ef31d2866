"""When a node publishes its trust report: a budget that stays flat as the network grows.

Every node used to gossip its report every ``report_interval_s`` (10 s) on the
one global trust topic, so each node received N / 10 reports a second — 100 at
1,000 nodes, 10,000 at 100,000 (issue 27; docs/protocol.md section 10). Three
rules bound it, all on the sender, with the wire unchanged:

- **Scaled interval** (the bound). A node publishes at most once per
  ``I = clamp(N / target, floor, ceiling)`` where ``N`` is its estimate of the
  network's size and ``target`` (``report_target_per_s``, 1/s) the trust
  reports each node should receive per second from the whole network. ``floor``
  is ``report_interval_s`` (10 s), so a devnet behaves as before; ``ceiling``
  (``report_max_interval_s``, a week) caps how stale a report can get when the
  estimate is inflated by Sybil keys, at the price of the bound beyond
  ``ceiling × target`` nodes (604,800).
- **Only on change** (the saving). Within that budget an unchanged row is not
  re-sent: a node publishes when its row moved by ``report_change_ppm`` (L1, in
  ppm of a row that sums to 1,000,000) or when ``R = max(I, report_refresh_s)``
  has passed (the refresh that keeps it alive at receivers). Its first
  ``report_startup_reports`` reports go out every ``I`` regardless: a node that
  just started has no gossip mesh yet, and its first report may reach nobody.
- **Receivers keep reports long enough.** A receiver expires a report after
  ``max(report_max_age_s, 3 × R)`` by its own estimate of ``N``: two lost
  refreshes in a row are tolerated, and estimates that differ by up to 3× across
  nodes still keep each other's rows.

The size estimate is the net layer's (``node.net.dht.dht_size_estimate``, from
the DHT routing table) or the number of report senders held, whichever is larger.
"""

from __future__ import annotations

from protocol.messages import TrustReport


def report_interval_s(
    estimated_nodes: int, floor_s: float, target_per_s: float, ceiling_s: float
) -> float:
    """``clamp(N / target, floor, ceiling)``: the least time between two of our reports."""
    return min(max(floor_s, max(1, estimated_nodes) / target_per_s), max(floor_s, ceiling_s))


def refresh_interval_s(interval_s: float, refresh_s: float) -> float:
    """An unchanged row is re-sent after ``max(I, report_refresh_s)``."""
    return max(interval_s, refresh_s)


def receiver_max_age_s(refresh_s: float, max_age_floor_s: float) -> float:
    """How long a receiver keeps a sender's report: three refreshes, at least the floor."""
    return max(max_age_floor_s, 3 * refresh_s)


def row_change_ppm(previous: TrustReport | None, current: TrustReport) -> int:
    """L1 distance between two reports' rows in ppm (0 … 2,000,000); a missing peer is 0 ppm.

    A 0-ppm (distrust) entry that appears or goes counts as a full change: it is
    evidence receivers use, not a weight."""
    if previous is None:
        return 2 * 1_000_000
    before = {entry.peer: entry.weight_ppm for entry in previous.row}
    after = {entry.peer: entry.weight_ppm for entry in current.row}
    distrust_before = {peer for peer, weight in before.items() if weight == 0}
    distrust_after = {peer for peer, weight in after.items() if weight == 0}
    if distrust_before != distrust_after:
        return 2 * 1_000_000
    return sum(abs(before.get(peer, 0) - after.get(peer, 0)) for peer in before.keys() | after.keys())


def should_publish(
    since_last_s: float | None,
    change_ppm: int,
    published: int,
    *,
    interval_s: float,
    refresh_s: float,
    change_threshold_ppm: int,
    startup_reports: int,
) -> bool:
    """Publish now? Never sooner than ``interval_s`` after the last report; then if the
    row changed materially, the refresh is due, or we are still starting up."""
    if since_last_s is None:
        return True
    if since_last_s < interval_s:
        return False
    return (
        published < startup_reports
        or change_ppm >= change_threshold_ppm
        or since_last_s >= refresh_s
    )

"""Gossipsub parameters, in one place, with the reason for each non-default.

py-libp2p 0.8.1 defaults that do not suit a small marketplace mesh:

- protocol: it speaks /meshsub/1.2 when the peer does and then sends one
  IDONTWANT per message per mesh peer (measured 25x slower at 10 nodes), so
  we offer /meshsub/1.1.0 only.
- heartbeat: 120 s by default, i.e. meshes repair after minutes; we use ~1 s.
- spam protection: a fixed 10 msg/s per topic per forwarder, dropped silently
  (and the forwarder penalised); our own validators and scoring replace it.
- message ids: default is (from, pubsub seqno) with the seqno counter seeded
  from the clock in seconds, so a node restarted within a busy period reuses
  ids and its new messages are dropped as "seen". Our envelopes are unique
  (sender, seq, signature), so the id is the hash of the data, which also
  makes a byte-identical replay a silent duplicate, not a penalty for the
  honest relay that forwards it.
- seen cache TTL: longer than the validator's clock window, so a replay of a
  message still in the seen cache is dropped early, and anything older is
  rejected as stale. The validation cache TTL stays below it so a cached
  "valid" verdict can never outlive the seen entry.
- peer exchange (v1.1 PX) is on: a PRUNE we send carries up to 16 other peers
  of the topic (with their signed peer records) so a peer dropped from an
  oversubscribed mesh, typically at a bootstrap node, learns where to go; PX
  is accepted only from peers whose score is not negative.
- adaptive gossip / eclipse protection (v2.0 extras) are off: they re-tune the
  mesh on heuristics that assume many distinct IPs and cost CPU per heartbeat.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from libp2p.abc import IHost
from libp2p.peer.id import ID
from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11, GossipSub
from libp2p.pubsub.pb import rpc_pb2
from libp2p.pubsub.pubsub import Pubsub
from libp2p.pubsub.score import ScoreParams

from protocol.codec import MAX_MESSAGE_BYTES

MESHSUB_PROTOCOL = PROTOCOL_ID_V11


@dataclass(frozen=True)
class GossipConfig:
    heartbeat_s: float = 1.0
    degree: int = 6
    degree_low: int = 4
    degree_high: int = 12
    gossip_window: int = 3
    gossip_history: int = 5
    fanout_ttl_s: int = 60
    prune_back_off_s: int = 60
    seen_ttl_s: int = 300
    validation_cache_ttl_s: int = 120
    validation_cache_size: int = 4096
    # Pubsub RPC frames may batch several messages; one envelope is at most
    # MAX_MESSAGE_BYTES, the frame limit leaves room for protobuf framing.
    max_rpc_bytes: int = 1024 * 1024
    max_message_bytes: int = MAX_MESSAGE_BYTES
    # Envelopes are signed by the sender key already; the libp2p-pubsub signature
    # over the same bytes is kept because py-libp2p's blacklist and origin checks
    # rely on an authenticated ``from`` field.
    strict_signing: bool = True
    # Gossipsub's own gate thresholds on the application score (see scoring.py).
    graylist_threshold: float = -50.0
    do_px: bool = True
    px_peers: int = 16
    accept_px_threshold: float = 0.0


def message_id(message: rpc_pb2.Message) -> bytes:
    """Content-addressed pubsub message id (see module docstring)."""
    return hashlib.sha256(message.data).digest()


def build_router(config: GossipConfig, app_score: Callable[[ID], float]) -> GossipSub:
    score_params = ScoreParams(
        p6_appl_slack_weight=1.0,
        app_specific_score_fn=app_score,
        graylist_threshold=config.graylist_threshold,
        accept_px_threshold=config.accept_px_threshold,
    )
    return GossipSub(
        protocols=[MESHSUB_PROTOCOL],
        degree=config.degree,
        degree_low=config.degree_low,
        degree_high=config.degree_high,
        time_to_live=config.fanout_ttl_s,
        gossip_window=config.gossip_window,
        gossip_history=config.gossip_history,
        heartbeat_initial_delay=0.1,
        heartbeat_interval=config.heartbeat_s,  # type: ignore[arg-type]  # int-typed, float works
        prune_back_off=config.prune_back_off_s,
        do_px=config.do_px,
        px_peers_count=config.px_peers,
        score_params=score_params,
        adaptive_gossip_enabled=False,
        spam_protection_enabled=False,
        eclipse_protection_enabled=False,
    )


def build_pubsub(host: IHost, router: GossipSub, config: GossipConfig) -> Pubsub:
    return Pubsub(
        host,
        router,
        strict_signing=config.strict_signing,
        msg_id_constructor=message_id,
        seen_ttl=config.seen_ttl_s,
        validation_cache_ttl=config.validation_cache_ttl_s,
        validation_cache_size=config.validation_cache_size,
        max_inbound_rpc_size=config.max_rpc_bytes,
    )

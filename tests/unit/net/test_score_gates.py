"""Score gates that cannot refuse (node.net.libp2p_tuning, 16.), on a real node's scorer:
with the publish and gossip thresholds at -inf (ours) they answer without scoring the
peer; a finite threshold still scores and refuses."""

from __future__ import annotations

import math

from libp2p.peer.id import ID

from protocol.identity import Identity
from tests.support.net import make_net

TOPIC = "/crystalmesh/devnet/1/skills"


def _peer() -> ID:
    return ID.from_base58(Identity.generate().peer_id)


def test_gates_at_minus_infinity_answer_without_scoring() -> None:
    scorer = make_net().router.scorer
    assert scorer is not None
    assert scorer.params.publish_threshold == scorer.params.gossip_threshold == -math.inf
    scored = []
    original = scorer.topic_score
    scorer.topic_score = lambda peer, topic: scored.append(peer) or original(peer, topic)  # type: ignore[method-assign]
    peer = _peer()
    assert scorer.allow_publish(peer, [TOPIC]) and scorer.allow_gossip(peer, [TOPIC])
    assert scored == []  # 0.8.1 computes the topic score for each
    assert not scorer.allow_publish(peer, []) and not scorer.allow_gossip(peer, [])


def test_a_finite_threshold_still_scores_and_refuses() -> None:
    scorer = make_net().router.scorer
    assert scorer is not None
    scorer.params.publish_threshold = 0.0
    scorer.params.gossip_threshold = 0.0
    scorer.params.p4_invalid_messages.weight = 1.0
    scorer.params.p4_invalid_messages.cap = 10.0
    peer = _peer()
    assert scorer.allow_publish(peer, [TOPIC]) and scorer.allow_gossip(peer, [TOPIC])
    scorer.on_invalid_message(peer, TOPIC)
    assert not scorer.allow_publish(peer, [TOPIC]) and not scorer.allow_gossip(peer, [TOPIC])

"""node.net.rules.validation / scoring / sequence numbers: pure, with an injected clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.config import ConfigError, NetConfig, load_config
from node.net.gossip import SequenceSource
from node.net.rules.scoring import PeerScores, ScoringConfig
from node.net.rules.validation import (
    DEFAULT_RATE_LIMITS,
    MessageValidator,
    Rejection,
    RejectionCounter,
    ReplayGuard,
    rate_limits,
)
from protocol.codec import encode
from protocol.envelope import InvalidEnvelope, seal
from protocol.identity import Identity
from protocol.messages import InvalidMessage, ListingBatch, WeatherLift
from protocol.topics import BOUNTIES, SKILLS, TRUST, WEATHER
from tests.support.net import make_listing, make_weather

NOW = 1_700_000_000_000
SELLER = Identity.from_seed(b"s" * 32)
MANAGEMENT = Identity.from_seed(b"m" * 32)


def validator(now: int = NOW, **kwargs: object) -> MessageValidator:
    return MessageValidator(
        management_keys={MANAGEMENT.public_key},
        clock_window_s=120,
        max_weather_duration_s=3600,
        now_ms=lambda: now,
        **kwargs,  # type: ignore[arg-type]
    )


def listing(seq: int, issued_at_ms: int = NOW, name: str = "a") -> bytes:
    return seal(SELLER, "skill_listing", make_listing(SELLER, name, NOW), seq, issued_at_ms)


def weather(
    identity: Identity = MANAGEMENT, seq: int = 1, issued: int = NOW, duration_ms: int = 600_000
) -> bytes:
    return seal(identity, "weather_alert", make_weather(issued, duration_ms), seq, issued)


def rejected(check: MessageValidator, topic: str, data: bytes) -> str:
    state_before = dict(check.replay_guard._senders)
    with pytest.raises(InvalidEnvelope) as raised:
        check.check(topic, data, "peer")
    # A rejection never changes the replay state.
    assert dict(check.replay_guard._senders) == state_before
    return raised.value.reason


def test_valid_listing_and_weather_are_accepted() -> None:
    check = validator()
    envelope = check.check(SKILLS, listing(1), "peer")
    assert envelope.sender == SELLER.public_key and envelope.seq == 1
    assert check.check(WEATHER, weather(), "peer").kind == "weather_alert"


def test_envelope_level_rejections() -> None:
    check = validator()
    tampered = bytearray(listing(1))
    tampered[-2] ^= 0xFF
    assert rejected(check, SKILLS, bytes(tampered)) == "bad_signature"
    assert rejected(check, SKILLS, b"\xff\x00garbage") == "malformed"
    assert rejected(check, SKILLS, encode({"kind": "skill_listing"})) == "malformed"
    assert rejected(check, SKILLS, b"\x00" * (256 * 1024 + 1)) == "oversize"


def test_kind_must_match_topic() -> None:
    check = validator()
    assert rejected(check, TRUST, listing(1)) == "wrong_topic"
    assert rejected(check, "/crystalmesh/1/unknown", listing(1)) == "wrong_topic"
    assert rejected(check, SKILLS, weather()) == "wrong_topic"


@pytest.mark.parametrize("skew_ms", [-120_001, 120_001, -(10**8)])
def test_issued_at_outside_the_clock_window_is_stale(skew_ms: int) -> None:
    assert rejected(validator(), SKILLS, listing(1, NOW + skew_ms)) == "stale"


@pytest.mark.parametrize("skew_ms", [-120_000, 0, 120_000])
def test_issued_at_inside_the_window_is_fine(skew_ms: int) -> None:
    validator().check(SKILLS, listing(1, NOW + skew_ms))


def test_replays_and_older_seqs_are_rejected_but_reordering_is_tolerated() -> None:
    check = validator()
    check.check(SKILLS, listing(10))
    assert rejected(check, SKILLS, listing(10, name="other")) == "replayed"
    check.check(SKILLS, listing(12))
    check.check(SKILLS, listing(11))  # overtaken on another gossip path: still new
    assert rejected(check, SKILLS, listing(11, name="again")) == "replayed"
    assert check.replay_guard.high_water(SELLER.public_key) == 12


def test_failed_message_does_not_burn_its_seq() -> None:
    check = validator()
    assert rejected(check, SKILLS, listing(5, NOW - 10**6)) == "stale"
    check.check(SKILLS, listing(5))  # the same seq, now valid, is accepted


def test_weather_rules() -> None:
    check = validator()
    assert rejected(check, WEATHER, weather(SELLER)) == "not_management"
    assert rejected(check, WEATHER, weather(duration_ms=3_600_001)) == "expiry_too_long"
    check.check(WEATHER, weather(seq=2, duration_ms=3_600_000))
    # Issued 100 s ago for 60 s: inside the clock window, but over.
    assert rejected(check, WEATHER, weather(seq=3, issued=NOW - 100_000, duration_ms=60_000)) == (
        "expired"
    )


def test_replay_guard_window_and_sender_bound() -> None:
    guard = ReplayGuard(reorder_window=4, max_senders=2)
    for seq in (1, 2, 3, 4, 5, 6):
        guard.commit(b"a", seq)
    assert not guard.is_new(b"a", 2)  # fell below the floor
    assert not guard.is_new(b"a", 6)
    assert guard.is_new(b"a", 7)
    guard.commit(b"b", 1)
    guard.commit(b"c", 1)  # evicts "a", the least recently heard sender
    assert len(guard) == 2 and guard.high_water(b"a") is None


def test_rejection_counter_counts_per_peer_and_reason_and_calls_hooks() -> None:
    counter = RejectionCounter(max_peers=2)
    heard: list[Rejection] = []
    counter.on_reject(heard.append)
    counter.on_reject(lambda rejection: 1 / 0)  # a failing hook does not break counting
    for reason in ("stale", "stale", "bad_signature"):
        counter.record(Rejection("p1", reason, SKILLS))
    counter.record(Rejection("p2", "replayed", SKILLS))
    assert counter.counts("p1") == {"stale": 2, "bad_signature": 1}
    assert counter.total("p1") == 3 and counter.counts("nobody") == {}
    assert len(heard) == 4
    counter.record(Rejection("p3", "stale", SKILLS))
    assert counter.peers() == ["p2", "p3"]


def test_peer_scores_penalise_by_reason_and_decay() -> None:
    clock = [0.0]
    scores = PeerScores(ScoringConfig(half_life_s=10.0, ban_threshold=-50.0), lambda: clock[0])
    assert scores.score("p") == 0.0
    scores.penalize("p", "bad_signature")
    scores.penalize("p", "bad_signature")
    assert scores.score("p") == pytest.approx(-40.0)
    assert not scores.below_threshold("p")
    scores.penalize("p", "bad_signature")
    assert scores.below_threshold("p")
    clock[0] = 10.0  # one half-life later
    assert scores.score("p") == pytest.approx(-30.0)
    scores.forget("p")
    assert scores.score("p") == 0.0


def test_sequence_source_is_monotonic_across_restarts() -> None:
    clock = [NOW]
    first = SequenceSource(lambda: clock[0])
    a, b = first.next(), first.next()
    assert a == NOW * 1000 and b == a + 1
    restarted = SequenceSource(lambda: clock[0] + 1)  # a restart one millisecond later
    assert restarted.next() > b


def test_endorsements_must_be_a_management_keys_valid_signature() -> None:
    """Issue 11 row 3: forged and wrong-key endorsements are rejected, valid ones accepted."""
    import dataclasses

    from protocol.messages import Endorsement, ListingEndorsement, endorse, endorsement_valid

    check = validator()
    plain = make_listing(SELLER, "endorsed", NOW)
    forged = dataclasses.replace(plain, endorsement=Endorsement(MANAGEMENT.public_key, bytes(64)))
    stranger = endorse(plain, Identity.from_seed(b"x" * 32))
    valid = endorse(plain, MANAGEMENT)
    assert rejected(check, SKILLS, seal(SELLER, "skill_listing", forged, 1, NOW)) == "bad_endorsement"
    assert rejected(check, SKILLS, seal(SELLER, "skill_listing", stranger, 2, NOW)) == "bad_endorsement"
    accepted = check.check(SKILLS, seal(SELLER, "skill_listing", valid, 3, NOW), "peer").message()
    assert accepted.endorsement == valid.endorsement  # type: ignore[attr-defined]

    signature = valid.endorsement.signature  # type: ignore[union-attr]
    assert endorsement_valid(plain, MANAGEMENT.public_key, signature)
    assert not endorsement_valid(dataclasses.replace(plain, price_micro_usdc=1), MANAGEMENT.public_key,
                                 signature)
    gossip = ListingEndorsement(listing_id=plain.listing_id, signature=signature)
    assert rejected(check, SKILLS, seal(SELLER, gossip.KIND, gossip, 4, NOW)) == "not_management"
    assert check.check(SKILLS, seal(MANAGEMENT, gossip.KIND, gossip, 1, NOW), "peer").kind == gossip.KIND


def test_origin_rate_limits_default_to_the_shipped_values() -> None:
    assert rate_limits(NetConfig()) == DEFAULT_RATE_LIMITS == {
        SKILLS: (10.0, 30), TRUST: (120.0, 120), BOUNTIES: (5.0, 10),
    }
    assert validator().rate_limits[SKILLS].burst == 30


def test_origin_rate_limits_are_read_from_node_toml_and_env(tmp_path: Path) -> None:
    (tmp_path / "node.toml").write_text("[net]\norigin_listings_burst = 2\norigin_bounties_per_min = 1.5\n")
    config = load_config(tmp_path, environ={"CRYSTALMESH_NET_ORIGIN_TRUST_REPORTS_BURST": "7"})
    limits = rate_limits(config.net)
    assert limits == {SKILLS: (10.0, 2), TRUST: (120.0, 7), BOUNTIES: (1.5, 10)}
    check = validator(rate_limits=limits)
    check.check(SKILLS, listing(1, name="a"), "peer")
    check.check(SKILLS, listing(2, name="b"), "peer")
    assert rejected(check, SKILLS, listing(3, name="c")) == "rate_limited"


def test_a_rate_limit_no_bucket_can_hold_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"net\.origin_listings_per_min must be > 0"):
        rate_limits(NetConfig(origin_listings_burst=0))
    with pytest.raises(ConfigError, match="origin_trust_reports"):
        rate_limits(NetConfig(origin_trust_reports_per_min=-1.0))


def test_the_net_service_validates_with_its_configured_limits() -> None:
    from node.net.service import NetService

    net = NetService(NetConfig(origin_listings_burst=3, origin_listings_per_min=2.0), SELLER)
    assert net.validator.rate_limits[SKILLS].burst == 3
    assert net.validator.rate_limits[SKILLS].rate_per_s == 2.0 / 60
    assert net.validator.rate_limits[TRUST].burst == 120


def batch(sender: Identity, entries: list[bytes], seq: int = 1000) -> bytes:
    return seal(sender, "listing_batch", ListingBatch(entries=tuple(entries)), seq, NOW)


def test_a_listing_batch_is_one_message_and_its_entries_spend_the_catalogue_budget() -> None:
    """Issue 26 delivery 5: 80 listings in one batch pass where 80 single listings would hit
    the origin's limit (burst 30); the entries draw on the catalogue budget instead."""
    check = validator(batch_rate_limits={SKILLS: (60.0, 120)})
    entries = [listing(seq, name=f"n{seq}") for seq in range(1, 81)]
    envelope = check.check(SKILLS, batch(SELLER, entries), "peer")
    assert len(envelope.message().entries) == 80  # type: ignore[attr-defined]
    # 40 left in the catalogue budget: a second batch of 80 is over it, and spends nothing.
    assert rejected(check, SKILLS, batch(SELLER, entries, seq=1001)) == "rate_limited"
    assert check.check(SKILLS, batch(SELLER, entries[:40], seq=1002), "peer")


def test_a_batch_carries_only_valid_listings_of_its_own_sender() -> None:
    check = validator()
    other = Identity.from_seed(b"o" * 32)
    foreign = seal(other, "skill_listing", make_listing(other, "x", NOW), 1, NOW)
    assert rejected(check, SKILLS, batch(SELLER, [listing(1), foreign])) == "bad_body"
    tampered = bytearray(listing(2))
    tampered[-2] ^= 0xFF
    assert rejected(check, SKILLS, batch(SELLER, [listing(1), bytes(tampered)])) == "bad_signature"
    alert = weather(MANAGEMENT)
    assert rejected(check, SKILLS, batch(MANAGEMENT, [alert])) == "wrong_topic"
    # Nothing of the rejected batches was spent: a full-budget batch still passes.
    full = validator(batch_rate_limits={SKILLS: (60.0, 2)})
    assert rejected(full, SKILLS, batch(SELLER, [listing(1), foreign])) == "bad_body"
    assert full.check(SKILLS, batch(SELLER, [listing(1), listing(2, name="b")]), "peer")


def lift(identity: Identity = MANAGEMENT, seq: int = 1, issued: int = NOW) -> bytes:
    return seal(identity, "weather_lift", WeatherLift(issued_at_ms=issued, reason="false alarm"), seq, issued)


def test_weather_lift_rules() -> None:
    """A lift obeys an alert's rules: a management key, the clock window, and a seq above
    every weather message already accepted from that key (a captured lift cannot be replayed
    over a newer alert)."""
    check = validator()
    assert rejected(check, WEATHER, lift(SELLER)) == "not_management"
    assert rejected(check, WEATHER, lift(issued=NOW - 121_000)) == "stale"
    check.check(WEATHER, weather(seq=5))
    assert rejected(check, WEATHER, lift(seq=4)) == "replayed"
    check.check(WEATHER, lift(seq=6))
    assert rejected(check, WEATHER, lift(seq=6)) == "replayed"
    assert rejected(check, SKILLS, lift(seq=7)) == "wrong_topic"
    check.check(WEATHER, weather(seq=7))
    assert rejected(check, WEATHER, lift(seq=6)) == "replayed"


def skill_warning(identity: Identity, seq: int, issued: int = NOW, body_issued: int | None = None,
                  listing_id: str | None = "ab" * 32) -> bytes:
    from protocol.messages import SkillWarning

    message = SkillWarning(listing_id=listing_id, content_hash=None, reason="poison",
                           issued_at_ms=issued if body_issued is None else body_issued)
    return seal(identity, SkillWarning.KIND, message, seq, issued)


def test_skill_warnings_have_a_budget_per_origin_management_keys_exempt() -> None:
    check = validator()
    for seq in range(1, 7):
        check.check(SKILLS, skill_warning(SELLER, seq), "peer")
    # The 7th within the minute is over the origin's warning budget (6, burst 6), and a
    # rejection spends nothing: the same seq is still new once the budget refills.
    assert rejected(check, SKILLS, skill_warning(SELLER, 7)) == "rate_limited"
    for seq in range(1, 20):
        check.check(SKILLS, skill_warning(MANAGEMENT, seq), "peer")
    # Listings of the same origin keep their own budget.
    check.check(SKILLS, listing(8), "peer")


def test_a_skill_warning_is_signed_fresh_new_and_well_formed() -> None:
    check = validator()
    check.check(SKILLS, skill_warning(SELLER, 1), "peer")
    assert rejected(check, SKILLS, skill_warning(SELLER, 1)) == "replayed"
    assert rejected(check, SKILLS, skill_warning(SELLER, 2, issued=NOW - 600_000)) == "stale"
    # A body that names nothing, or dates itself apart from its envelope, is never sealed.
    for bad in ({"body_issued": NOW - 1}, {"listing_id": None}):
        with pytest.raises((InvalidEnvelope, InvalidMessage)):
            skill_warning(SELLER, 3, **bad)  # type: ignore[arg-type]
    assert rejected(check, WEATHER, skill_warning(SELLER, 5)) == "wrong_topic"
    forged = bytearray(skill_warning(SELLER, 6))
    forged[-5] ^= 0xFF
    assert rejected(check, SKILLS, bytes(forged)) == "bad_signature"


def test_our_own_messages_passed_back_do_not_spend_our_publishing_budget() -> None:
    """A restarted node hears its old listings again from its peers: they are ours (signed
    with our key), so they do not spend the budget our own publishes are held to, which
    once refused the node's first publish after a restart as 'rate_limited'. Another
    origin's messages still spend theirs."""
    check = validator(rate_limits={SKILLS: (10.0, 2)}, own_key=SELLER.public_key)
    for seq in (1, 2, 3, 4):
        check.check(SKILLS, listing(seq, name=f"old{seq}"), "peer")  # echoes: all accepted
    check.check(SKILLS, listing(5, name="new1"), "me", from_self=True)
    check.check(SKILLS, listing(6, name="new2"), "me", from_self=True)
    with pytest.raises(InvalidEnvelope, match="rate_limited"):  # our own publishes keep theirs
        check.check(SKILLS, listing(7, name="new3"), "me", from_self=True)

    stranger = validator(rate_limits={SKILLS: (10.0, 2)}, own_key=MANAGEMENT.public_key)
    stranger.check(SKILLS, listing(1, name="a"), "peer")
    stranger.check(SKILLS, listing(2, name="b"), "peer")
    assert rejected(stranger, SKILLS, listing(3, name="c")) == "rate_limited"

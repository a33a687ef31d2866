"""Withdrawal, bounty and listings-sync messages: bounds, bindings, and check_synced."""

from __future__ import annotations

import pytest

from node.net.rules.validation import MessageValidator
from protocol.envelope import InvalidEnvelope, seal, sign_envelope
from protocol.identity import Identity
from protocol.liveness import (
    MAX_SYNC_PAGE_BYTES,
    NOTICE_SYNC_LIFETIME_MS,
    TRUST_REPORT_SYNC_MAX_AGE_MS,
    WITHDRAWAL_LIFETIME_MS,
    Bounty,
    ListingsSyncPage,
    ListingsSyncRequest,
    ListingsSyncRequestV2,
    ListingWithdrawal,
)
from protocol.messages import InvalidMessage, SkillListing, SkillWarning, listing_id_for
from protocol.topics import (
    BOUNTIES,
    SKILLS,
    SYNCABLE_KINDS_V1,
    SYNCED_TRUST_KINDS,
    TRUST,
)
from tests.support.net import make_listing

SELLER = Identity.from_seed(b"\x01" * 32)
NOW = 1_700_000_000_000
DAY = 86_400_000


def withdrawal(who: Identity = SELLER) -> ListingWithdrawal:
    return ListingWithdrawal(listing_id=listing_id_for(who.public_key, "skill-x", 2),
                             stable_skill_id="skill-x", skill_version=2)


def bounty(**overrides: object) -> Bounty:
    fields: dict[str, object] = {"bounty_id": "ab" * 16, "text": "need: a skill that x",
                                 "reward_micro_usdc": 50_000, "expires_at_ms": NOW + DAY}
    return Bounty(**(fields | overrides))  # type: ignore[arg-type]


def test_a_withdrawal_is_bound_to_its_seller() -> None:
    seal(SELLER, ListingWithdrawal.KIND, withdrawal(), 1, NOW)
    with pytest.raises(InvalidEnvelope, match="bad_body"):
        seal(Identity.generate(), ListingWithdrawal.KIND, withdrawal(), 1, NOW)


def test_bounty_bounds() -> None:
    seal(SELLER, Bounty.KIND, bounty(), 1, NOW)
    with pytest.raises(InvalidMessage):
        bounty(reward_micro_usdc=10**12 + 1)
    with pytest.raises(InvalidMessage):
        bounty(text="x" * 1025)
    with pytest.raises(InvalidMessage):
        bounty(bounty_id="not-hex")
    with pytest.raises(InvalidEnvelope, match="bad_body"):  # lives longer than 7 days
        seal(SELLER, Bounty.KIND, bounty(expires_at_ms=NOW + 8 * DAY), 1, NOW)
    with pytest.raises(InvalidEnvelope, match="bad_body"):  # expires before it was issued
        seal(SELLER, Bounty.KIND, bounty(expires_at_ms=NOW), 1, NOW)


def test_sync_page_bounds() -> None:
    ListingsSyncRequest(cursor=0, limit=128)
    with pytest.raises(InvalidMessage):
        ListingsSyncRequest(cursor=0, limit=129)
    with pytest.raises(InvalidMessage):
        ListingsSyncPage(entries=(b"x",) * 129, next_cursor=1, more=False)
    with pytest.raises(InvalidMessage):
        ListingsSyncPage(entries=(b"x" * 32_769,), next_cursor=1, more=False)
    with pytest.raises(InvalidMessage):  # seven entries of 30 000 bytes: over the page budget
        ListingsSyncPage(entries=(b"x" * 30_000,) * 7, next_cursor=1, more=False)
    assert MAX_SYNC_PAGE_BYTES > 30_000 * 6
    with pytest.raises(InvalidMessage):
        ListingsSyncPage(entries=(b"",), next_cursor=1, more=False)


def validator(now: int) -> MessageValidator:
    return MessageValidator([], now_ms=lambda: now)


def listing_bytes(issued: int, seq: int = 1) -> bytes:
    return seal(SELLER, SkillListing.KIND, make_listing(SELLER, now_ms=issued), seq, issued)


def test_check_synced_takes_old_but_live_state_that_gossip_would_call_stale() -> None:
    data = listing_bytes(NOW)
    later = NOW + 3_600_000  # an hour later: far outside the 120 s gossip window
    with pytest.raises(InvalidEnvelope, match="stale"):
        validator(later).check(SKILLS, data)
    assert validator(later).check_synced(data).kind == SkillListing.KIND
    # The same envelope twice is not a replay here: the listing book decides newest state.
    check = validator(later)
    check.check_synced(data)
    check.check_synced(data)


@pytest.mark.parametrize(("data", "now", "reason"), [
    (listing_bytes(NOW), NOW + DAY + 1, "expired"),                  # listing past expires_at
    (listing_bytes(NOW + 200_000), NOW, "stale"),                    # from the future
    (seal(SELLER, ListingWithdrawal.KIND, withdrawal(), 1, NOW), NOW + WITHDRAWAL_LIFETIME_MS,
     "expired"),
    (seal(SELLER, "trust_report", {"epoch": 1, "row": []}, 1, NOW), NOW, "wrong_topic"),
    (b"\xa0", NOW, "malformed"),
])
def test_check_synced_refusals(data: bytes, now: int, reason: str) -> None:
    with pytest.raises(InvalidEnvelope) as error:
        validator(now).check_synced(data)
    assert error.value.reason == reason


def test_check_synced_rejects_forgery_and_rate_limits_per_origin() -> None:
    data = listing_bytes(NOW)
    forged = data.replace(sign_envelope(SELLER, SkillListing.KIND, 1,
                                        make_listing(SELLER, now_ms=NOW).to_body(), 1,
                                        NOW).signature, bytes(64))
    with pytest.raises(InvalidEnvelope, match="bad_signature"):
        validator(NOW).check_synced(forged)
    limited = MessageValidator([], now_ms=lambda: NOW, sync_rate_limits={SKILLS: (1.0, 2)})
    limited.check_synced(listing_bytes(NOW, 1))
    limited.check_synced(listing_bytes(NOW, 2))
    with pytest.raises(InvalidEnvelope, match="rate_limited"):
        limited.check_synced(listing_bytes(NOW, 3))


def test_bounties_travel_on_their_own_topic_with_a_rate_limit() -> None:
    check = validator(NOW)
    for seq in range(1, 11):
        check.check(BOUNTIES, seal(SELLER, Bounty.KIND, bounty(), seq, NOW))
    with pytest.raises(InvalidEnvelope, match="rate_limited"):
        check.check(BOUNTIES, seal(SELLER, Bounty.KIND, bounty(), 11, NOW))
    with pytest.raises(InvalidEnvelope, match="wrong_topic"):
        check.check(TRUST, seal(SELLER, Bounty.KIND, bounty(), 12, NOW))


def test_synced_trust_reports_and_notices_have_their_own_kinds_and_lifetimes() -> None:
    """A trust-report page carries only trust reports, each at most a day old; a listings page
    of version 2 carries notices for 30 days, version 1 none (an older node's rule)."""
    report = seal(SELLER, "trust_report", {"epoch": 1, "row": []}, 1, NOW)
    assert validator(NOW + 3_600_000).check_synced(report, SYNCED_TRUST_KINDS).kind == "trust_report"
    with pytest.raises(InvalidEnvelope, match="expired"):
        validator(NOW + TRUST_REPORT_SYNC_MAX_AGE_MS + 1).check_synced(report, SYNCED_TRUST_KINDS)
    with pytest.raises(InvalidEnvelope, match="wrong_topic"):
        validator(NOW).check_synced(listing_bytes(NOW), SYNCED_TRUST_KINDS)
    signature = sign_envelope(SELLER, "trust_report", 1, {"epoch": 1, "row": []}, 1, NOW).signature
    forged = report.replace(signature, bytes(64))
    with pytest.raises(InvalidEnvelope, match="bad_signature"):
        validator(NOW).check_synced(forged, SYNCED_TRUST_KINDS)
    warning = seal(SELLER, SkillWarning.KIND, SkillWarning(listing_id="ab" * 32, content_hash=None,
                                                           reason="poison", issued_at_ms=NOW), 1, NOW)
    assert validator(NOW + 29 * DAY).check_synced(warning).kind == SkillWarning.KIND
    with pytest.raises(InvalidEnvelope, match="expired"):
        validator(NOW + NOTICE_SYNC_LIFETIME_MS + 1).check_synced(warning)
    with pytest.raises(InvalidEnvelope, match="wrong_topic"):
        validator(NOW).check_synced(warning, SYNCABLE_KINDS_V1)


def test_a_version_2_request_names_valid_shards_only() -> None:
    assert ListingsSyncRequestV2(0, 128, 8, (1, 5)).shards == (1, 5)
    for count, shards in ((0, (1,)), (6, (1,)), (8, (8,)), (8, (5, 1)), (8, (1, 1))):
        with pytest.raises(InvalidMessage):
            ListingsSyncRequestV2(0, 128, count, shards)

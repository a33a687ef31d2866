"""node.market.intake: each skills-topic kind reaches the one handler its desk registered."""

from __future__ import annotations

import pytest

from node.market.intake import SkillsIntake
from protocol.envelope import Envelope, open_envelope, seal
from protocol.messages import (
    Bounty,
    ListingBatch,
    ListingEndorsement,
    Message,
    SkillListing,
    SkillWarning,
)
from tests.fixtures.messages import HASH, SELLER, T0_MS, sample_listing


def _envelope(message: Message, seq: int = 1) -> Envelope:
    return open_envelope(seal(SELLER, message.KIND, message, seq, T0_MS))


def _intake(taken: list[tuple[str, str]], *kinds: str) -> SkillsIntake:
    intake = SkillsIntake(clock=lambda: T0_MS)
    for kind in kinds:
        async def handler(envelope: Envelope, desk: str = kind) -> None:
            taken.append((desk, envelope.kind))

        intake.register(kind, handler)
    return intake


async def test_each_kind_goes_to_its_handler_and_a_batch_to_its_entries_handlers() -> None:
    taken: list[tuple[str, str]] = []
    intake = _intake(taken, SkillListing.KIND, SkillWarning.KIND)
    listing = seal(SELLER, SkillListing.KIND, sample_listing(), 2, T0_MS)
    await intake.take(_envelope(ListingBatch(entries=(listing, listing))))
    await intake.take(_envelope(SkillWarning(HASH, None, "exfiltrates ~/.ssh", T0_MS), 3))
    assert taken == [(SkillListing.KIND, SkillListing.KIND)] * 2 + [
        (SkillWarning.KIND, SkillWarning.KIND)]


async def test_a_kind_no_desk_registered_is_counted_and_dropped() -> None:
    taken: list[tuple[str, str]] = []
    intake = _intake(taken, SkillListing.KIND)
    await intake.take(_envelope(ListingEndorsement(HASH, b"\x07" * 64)))
    assert taken == [] and intake.unhandled == {ListingEndorsement.KIND: 1}


def test_one_handler_per_kind_and_only_skills_topic_kinds() -> None:
    intake = _intake([], SkillListing.KIND)

    async def other(envelope: Envelope) -> None: ...

    for kind in (SkillListing.KIND, Bounty.KIND, ListingBatch.KIND):
        with pytest.raises(ValueError):
            intake.register(kind, other)

"""What a listing shows peers: a SKILL.md bundle's name and description by default, never its body
or resources; a plain-text skill keeps the first-words default."""

from __future__ import annotations

import pytest

from node.crystals.model import Crystal, SemanticType
from node.errors import NodeError
from node.market.selling.publish import listing_name_and_summary
from protocol import skill_bundle as sb

BODY = "Stop the replica, take a fresh pg_basebackup and restart it with hot standby on."


def skill(text: str) -> Crystal:
    return Crystal(text=text, semantic_type=SemanticType.SKILL, skill_category="ops")


def test_bundle_lists_its_name_and_description_only() -> None:
    bundle = sb.build("---\nname: pg-replica\ndescription: Recover a wedged Postgres replica.\n---\n" + BODY,
                      {"scripts/run.sh": "pg_basebackup -D /var/lib/pg\n"})
    name, summary = listing_name_and_summary(skill(bundle.encode()), None, None)
    assert (name, summary) == ("pg-replica", "Recover a wedged Postgres replica.")
    assert "basebackup" not in name + summary
    assert listing_name_and_summary(skill(bundle.encode()), "Own name", "Own summary") == (
        "Own name", "Own summary")


def test_plain_text_skill_keeps_first_words() -> None:
    name, summary = listing_name_and_summary(skill(BODY), None, None)
    assert name.startswith("Stop the replica") and summary == "A ops skill."


def test_a_bundle_description_with_a_secret_is_refused() -> None:
    bundle = sb.build("---\nname: leaky\ndescription: uses key AKIAIOSFODNN7EXAMPLE\n---\n" + BODY)
    with pytest.raises(NodeError, match="secret/PII"):
        listing_name_and_summary(skill(bundle.encode()), None, None)

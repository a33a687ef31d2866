"""Negated phrases of selection questions (node.memory.search.negation): pure functions."""

from __future__ import annotations

import pytest

from node.memory.search.negation import MAX_SCOPES, Negation, negated_share, split_negation


@pytest.mark.parametrize(
    ("query", "positive", "negated"),
    [
        ("the bastion that does not go through Teleport", "the bastion that does", {"go", "throu", "telep"}),
        ("which flight was not to Amsterdam", "which flight was", {"amste"}),
        ("the Airflow version we didn't put in prod", "the Airflow version we", {"put", "prod"}),
        # "or" stays inside the phrase; a colon ends it
        ("not the chequing account or the Tangerine one: the savings account that pays interest",
         ": the savings account that pays interest", {"chequ", "tange", "one"}),
        ("the statement that was not a Visa statement or a tax slip", "the statement that was", {"visa", "tax", "slip"}),
        # an identifier is one term, not its pieces
        ("the Postgres host that is not the pg-main-02 primary", "the Postgres host that is", {"pg-main-02", "prima"}),
        ("a migration I did that had nothing to do with Kafka", "a migration I did that had", {"kafka"}),
        ("which logging option did we drop, not the one we kept", "which logging option did we drop,", {"one", "kept"}),
    ],
)
def test_selection_questions_are_split(query: str, positive: str, negated: set[str]) -> None:
    assert split_negation(query) == Negation(positive, frozenset(negated))


@pytest.mark.parametrize(
    "query",
    [
        "why didn't the backup run",  # asks for an explanation: its answer holds these words
        "how come the deploy did not start",
        "which Kafka ticket is open",  # no negation
        "which ticket did we decide not to do",  # nothing but stopwords negated
        "not Kafka",  # nothing left to search for
        "",
    ],
)
def test_other_questions_are_left_alone(query: str) -> None:
    assert split_negation(query) is None


def test_a_term_also_wanted_is_not_negated() -> None:
    negation = split_negation("the Postgres upgrade that was not on the main Postgres cluster")
    assert negation is not None and negation.negated == {"main", "clust"}


def test_share_counts_what_a_memory_affirms_not_what_it_negates() -> None:
    negation = split_negation("the migration bot commit that had nothing to do with lock timeouts")
    assert negation is not None
    assert negated_share(negation, "Commit 7e2d41c added lock_timeout and statement_timeout.") == 1.0
    assert negated_share(negation, "Commit 7e2d41c added lock and timeouts to the bot.") == 1.0
    # the memory that says it is *not* about locks is not the one ruled out
    assert negated_share(negation, "Commit 7e2d14c bumped Go; nothing to do with locks or timeouts.") == 0.0
    host = split_negation("the Postgres host that is not the pg-main-02 primary")
    assert host is not None
    assert negated_share(host, "pg-main-02 is the Postgres primary") == 1.0
    assert negated_share(host, "pg-main-20 is the reporting replica of pg-main-02") == 0.5


@pytest.mark.parametrize("memory", [
    "INC-2340: no customer was affected by the expired certificate.",
    "Nobody was affected when the certificate expired.",
    "We rotated the certificate without affecting a customer.",
])
def test_a_memory_negating_with_no_nobody_or_without_does_not_affirm(memory: str) -> None:
    negation = split_negation("the incident where a customer was not affected")
    assert negation is not None and negation.negated == {"affec"}
    assert negated_share(negation, memory) == 0.0
    assert negated_share(negation, "INC-2339: every customer was affected by the outage.") == 1.0


def test_no_in_a_question_is_not_a_cue() -> None:
    # "no" picks a memory by what it lacks; the question's own cues are unchanged
    assert split_negation("the deploy with no rollback plan") is None


def test_a_crafted_question_is_bounded() -> None:
    query = "the thing that is " + " ".join(f"not word{index}," for index in range(2_000))
    negation = split_negation(query)
    assert negation is not None and len(negation.negated) == MAX_SCOPES
    memory = " ".join(f"not word{index}," for index in range(20_000))
    assert 0.0 <= negated_share(negation, memory) <= 1.0

"""Hybrid fusion and FTS5 query construction, on hand-made lists (no model, no store)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.memory.search.fusion import (
    DEFAULT_PARAMS,
    FusionParams,
    agreement,
    code_tokens,
    fts_query,
    fuse,
    identifier_tokens,
    is_identifier,
    lexical_evidence,
    lexical_trust,
    lexical_weight,
    peakedness,
    rarity,
    rrf,
)


def test_identifier_query_puts_the_exact_lexical_match_first() -> None:
    # Dense prefers the near-duplicate (ERR-4413); only BM25 knows which memory names ERR-4412.
    dense = [("err4413", 0.71), ("err4412", 0.69), ("err4414", 0.66), ("token_fix", 0.52)]
    lexical = [("err4412", -9.8), ("err4413", -2.1), ("err4414", -2.1)]
    fused = fuse("what does ERR-4412 mean", dense, lexical, k=3)
    assert fused[0][0] == "err4412"
    # Among equal lexical matches the dense order decides.
    assert [doc_id for doc_id, _ in fused[1:]] == ["err4413", "err4414"]


def test_paraphrase_query_keeps_a_strong_dense_match_first() -> None:
    # BM25's best shares only the incidental words "user" and "session".
    dense = [("token_expired", 0.68), ("login_latency", 0.41), ("support", 0.22)]
    lexical = [("support", -7.5), ("login_latency", -6.9), ("token_expired", -1.2)]
    fused = fuse("what should I do when a user's login session has run out", dense, lexical, k=3)
    assert [doc_id for doc_id, _ in fused] == ["token_expired", "login_latency", "support"]


def test_identifier_absent_from_the_corpus_falls_back_to_dense() -> None:
    dense = [("a", 0.6), ("b", 0.5)]
    lexical = [("b", -3.0)]
    assert (
        lexical_weight("JIRA-9999 status", doc_freq=lambda token: 0.0)
        == DEFAULT_PARAMS.base_lexical_weight
    )
    # An identifier no memory contains adds no lexical trust beyond the base weight.
    assert fuse("JIRA-9999 status", dense, lexical, 2, doc_freq=lambda token: 0.0) == fuse(
        "status", dense, lexical, 2, doc_freq=lambda token: 0.0
    )


def test_lexical_confidence_buys_bm25_weight() -> None:
    # base 0 + confidence_weight 0.7 * 0.5 = 0.35; an identifier on top is capped at 0.9.
    assert DEFAULT_PARAMS.confidence_weight == 0.7
    assert lexical_weight("quick supper", confidence=0.5) == pytest.approx(0.35)
    assert lexical_weight("quick supper", confidence=0.0) == DEFAULT_PARAMS.base_lexical_weight
    assert lexical_weight("quick supper", confidence=7.0) == pytest.approx(0.7)  # clipped to 1
    assert lexical_weight("ERR-4091", doc_freq=lambda token: 0.001, confidence=1.0) == 0.9
    dense = [("meaning", 0.7), ("words", 0.6), ("other", 0.1)]  # "words" agrees in meaning too
    lexical = [("words", -9.0)]
    assert fuse("q", dense, lexical, 3)[0][0] == "meaning"
    assert fuse("q", dense, lexical, 3, lexical_confidence=1.0)[0][0] == "words"


def test_confidence_below_the_floor_is_no_lexical_evidence() -> None:
    # floor 0.2: 0.19 counts as 0, 0.2 as itself; weight 0.7 * 0.2 = 0.14.
    assert DEFAULT_PARAMS.confidence_floor == 0.2
    assert lexical_evidence(0.19) == 0.0
    assert lexical_evidence(0.2) == pytest.approx(0.2)
    assert lexical_evidence(3.0) == 1.0
    assert lexical_evidence(-1.0) == 0.0
    assert lexical_weight("quick supper", confidence=0.19) == 0.0
    assert lexical_weight("quick supper", confidence=0.2) == pytest.approx(0.14)
    # An identifier's rarity is evidence of its own, floor or not: 0.9 * 1.
    assert lexical_weight("ERR-4091", doc_freq=lambda token: 0.001, confidence=0.1) == pytest.approx(0.9)
    # Below the floor the fused order is the dense order, however strong BM25's list is.
    dense = [("meaning", 0.7), ("words", 0.6)]
    lexical = [("words", -9.0)]
    assert [doc for doc, _ in fuse("q", dense, lexical, 2, lexical_confidence=0.19)] == ["meaning", "words"]
    assert fuse("q", dense, lexical, 2, lexical_confidence=0.19)[0][1] == pytest.approx(1.0)


def test_agreement_ramps_from_low_to_high_by_hand() -> None:
    # r = where BM25's best hit falls between the lowest (0) and best (1) dense score;
    # agreement 0 at r <= 0.2, 1 at r >= 0.4, linear between.
    dense = [("a", 0.9), ("b", 0.4), ("c", 0.3), ("d", 0.1)]
    assert agreement(dense, [("a", -3.0)]) == 1.0
    assert agreement(dense, [("b", -3.0)]) == pytest.approx(0.875)  # r = 0.3 / 0.8 = 0.375
    assert agreement(dense, [("c", -3.0)]) == pytest.approx(0.25)  # r = 0.25
    assert agreement(dense, [("d", -3.0)]) == 0.0  # r = 0
    assert agreement(dense, [("elsewhere", -3.0), ("a", -1.0)]) == 0.0  # below every dense candidate
    assert agreement([], [("a", -3.0)]) == 1.0 and agreement(dense, []) == 1.0
    assert agreement([("a", -0.1)], [("a", -3.0)]) == 1.0  # one candidate: it is the best
    # A dense list that says nothing (every score equal, or none positive) vetoes nothing,
    # even for a hit it does not hold (the hashing embedder's list for a question sharing no token).
    assert agreement([("a", 0.0), ("b", 0.0)], [("elsewhere", -3.0)]) == 1.0
    assert agreement([("a", 0.3), ("b", 0.3)], [("elsewhere", -3.0)]) == 1.0
    assert agreement([("a", -0.1), ("b", -0.4)], [("elsewhere", -3.0)]) == 1.0
    hard = FusionParams(agreement_low=0.3, agreement_high=0.3)
    assert agreement(dense, [("b", -3.0)], hard) == 1.0
    assert agreement(dense, [("c", -3.0)], hard) == 0.0


def test_words_of_a_memory_far_from_the_meaning_buy_no_bm25_weight() -> None:
    # A reworded question shares words with an unrelated memory: full lexical confidence,
    # but BM25's best hit is far down the dense list, so the dense order stands.
    dense = [("meaning", 0.8), ("near", 0.7), ("words", 0.3)]
    lexical = [("words", -9.0), ("near", -1.0)]
    assert [doc for doc, _ in fuse("q", dense, lexical, 3, lexical_confidence=1.0)] == ["meaning", "near", "words"]
    # The same words in a memory that agrees in meaning do count.
    agreeing = [("meaning", 0.8), ("words", 0.7), ("near", 0.3)]
    assert fuse("q", agreeing, lexical, 3, lexical_confidence=1.0)[0][0] == "words"


def test_common_identifier_gets_less_lexical_weight_than_a_rare_one() -> None:
    rare = lexical_weight("port 5433", doc_freq=lambda token: 0.005)
    common = lexical_weight("port 5433", doc_freq=lambda token: 0.3)
    assert rare == pytest.approx(
        min(DEFAULT_PARAMS.max_lexical_weight, DEFAULT_PARAMS.identifier_weight)
    )
    assert common < rare


def test_rarity_by_hand() -> None:
    assert rarity(0.01) == 1.0  # in 1 % of memories: two decades
    assert rarity(0.1) == pytest.approx(0.5)
    assert rarity(1.0) == 0.0 and rarity(0.0) == 0.0


def test_rrf_matches_seed_formula() -> None:
    scores = rrf([["a", "b"], ["b", "c"]])
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61)


def test_fuse_rejects_flipped_bm25_signs_and_handles_edges() -> None:
    with pytest.raises(ValueError, match="bm25"):
        fuse("ERR-4412", [("a", 0.5)], [("a", 4.2)], 5)
    assert fuse("x", [("a", 0.5)], [], 0) == []
    assert fuse("x", [], [], 5) == []
    assert fuse("ERR-4412", [], [("a", -1.0), ("b", -0.5)], 5)[0][0] == "a"
    assert [doc_id for doc_id, _ in fuse("x", [("a", 0.5), ("b", 0.4)], [], 1)] == ["a"]


@pytest.mark.parametrize(
    "token",
    [
        "ERR-4412",
        "JIRA-2231",
        "db-prod-07",
        "a41be07",
        "E1102",
        "0x80070005",
        "5433",
        "2024-11-15",
        "search-03.prod.example.net",
        "ECONNRESET",
        "OOMKilled",
        "user_id",
    ],
)
def test_identifiers_are_recognised(token: str) -> None:
    assert is_identifier(token)


@pytest.mark.parametrize("token", ["database", "Postgres", "AWS", "42", "e-mail", "Berlin", "the"])
def test_words_are_not_identifiers(token: str) -> None:
    assert not is_identifier(token)


def test_identifier_tokens_keep_punctuated_runs_whole() -> None:
    assert identifier_tokens("why is db-prod-07 slow? see ERR-4412, PR #517.") == [
        "db-prod-07",
        "ERR-4412",
        "517",
    ]


def test_letters_only_identifiers_are_words_for_ranking() -> None:
    query = "when did HTTPS break on GitHub for OOMKilled pods on db-prod-07 after v2.3.1, user_id 5433"
    assert code_tokens(query) == ["db-prod-07", "v2.3.1", "user_id", "5433"]
    # A rare all-caps word buys no identifier weight: by hand, 0 + 0.7 * 0 + 0.9 * 0 = 0
    # (it would be 0.9 * rarity 1 = 0.9 as an identifier); the confidence term still applies.
    rare = lambda token: 0.001  # noqa: E731
    assert lexical_weight("why did HTTPS fail overnight", doc_freq=rare) == 0.0
    assert lexical_weight("why did HTTPS fail overnight", doc_freq=rare, confidence=0.5) == pytest.approx(0.35)
    assert lexical_weight("why did ERR-4091 fail overnight", doc_freq=rare) == pytest.approx(0.9)


def _fts() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
    connection.executemany(
        "INSERT INTO t (text) VALUES (?)",
        [
            ("ERR-4412 means the refresh token expired",),
            ("ERR 4413 and then 4412",),
            ('say "hello" NEAR me',),
        ],
    )
    return connection


def _match(connection: sqlite3.Connection, text: str) -> list[str]:
    expression = fts_query(text)
    if not expression:
        return []
    return [
        row[0]
        for row in connection.execute(
            "SELECT text FROM t WHERE t MATCH ? ORDER BY bm25(t)", (expression,)
        )
    ]


def test_fts_query_quotes_tokens_and_drops_stopwords() -> None:
    assert fts_query('what is "ERR-4412"?') == '"err-4412"'
    assert fts_query("the what") == '"the" OR "what"'
    assert fts_query("--- ?? !!") == ""


def test_fts_query_identifier_is_a_phrase() -> None:
    connection = _fts()
    assert _match(connection, "ERR-4412")[0] == "ERR-4412 means the refresh token expired"


@pytest.mark.parametrize(
    "text",
    [
        "ERR-4412",
        'say "hello',
        "NEAR(a b)",
        "a AND OR NOT",
        "col:value",
        "prefix*",
        "^start",
        "(unbalanced",
        "it's",
        '"',
        "C++ / C#",
        "ümlaut straße",
        "-",
        "a - b",
        "x.y.z",
        "#517",
        "\\",
        "{a b}",
        "+1",
    ],
)
def test_fts_query_never_raises_on_user_text(text: str) -> None:
    _match(_fts(), text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_fts_query_never_raises_on_any_text(text: str) -> None:
    _match(_fts(), text)


def test_peakedness_is_how_far_the_best_score_stands_out() -> None:
    assert peakedness([1.0, 0.0, 0.0, 0.0]) == pytest.approx(3 ** 0.5)
    assert peakedness([0.5, 0.5, 0.5]) == 0.0  # a flat list has found nothing
    assert peakedness([0.9, 0.1]) == 0.0  # too short to say


def test_lexical_trust_ramps_with_how_much_more_peaked_bm25_is() -> None:
    flat = [0.52, 0.50, 0.49, 0.50, 0.51, 0.48]
    peaked = [9.0, 1.0, 1.1, 0.9, 1.0, 1.2]
    assert lexical_trust(flat, peaked) == 1.0
    assert lexical_trust(peaked, flat) == 0.0
    assert lexical_trust(peaked, peaked) == 0.5
    assert lexical_trust([], peaked) == 0.0


def test_a_flat_dense_list_does_not_veto_a_peaked_bm25_list() -> None:
    """A conversation: every turn about as close in meaning to the question (a flat dense list),
    one turn naming its words (a peaked BM25 list) that the dense list ranks low. The agreement
    alone would give BM25 no weight; BM25's list being the more peaked, it keeps it."""
    dense = [(f"turn{number}", 0.60 - 0.002 * number) for number in range(40)]
    lexical = [("turn35", -12.0)] + [(f"turn{number}", -2.0 - 0.01 * number) for number in range(5)]
    assert agreement(dense, lexical) == 0.0
    fused = fuse("when did Melanie sign up for a pottery class", dense, lexical, k=3, lexical_confidence=0.8)
    assert fused[0][0] == "turn35"
    hard_cut = fuse("when did Melanie sign up for a pottery class", dense, lexical, k=3, lexical_confidence=0.8,
                    params=FusionParams(peaked_span=0.0))
    assert hard_cut[0][0] == "turn35"


def test_a_peaked_dense_list_still_vetoes_a_disagreeing_bm25_hit() -> None:
    # A reworded question: dense has found its memory; BM25's best shares an incidental word.
    dense = [("answer", 0.80)] + [(f"other{number}", 0.30 - 0.001 * number) for number in range(30)]
    lexical = [("incidental", -6.0), ("other1", -5.5), ("other2", -5.2), ("other3", -5.0)]
    assert lexical_trust([score for _, score in dense], [-score for _, score in lexical]) == 0.0
    fused = fuse("the place I sleep in the old capital", dense, lexical, k=3, lexical_confidence=0.5)
    assert fused[0][0] == "answer"

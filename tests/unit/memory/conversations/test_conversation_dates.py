"""Relative dates of a turn resolved against its session date (node.memory.conversations.dates)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from node.memory.conversations.dates import parse_when, resolve_relative

MONDAY = date(2023, 5, 8)  # LoCoMo's "1:56 pm on 8 May, 2023" is a Monday


@pytest.mark.parametrize(("text", "notes"), [
    ("I ran a race last Saturday", ["[last Saturday = 6 May 2023]"]),
    ("Lost my job yesterday", ["[yesterday = 7 May 2023]"]),
    ("we met two weeks ago", ["[two weeks ago = 24 April 2023]"]),
    ("we met 3 days ago", ["[3 days ago = 5 May 2023]"]),
    ("the show opens next month", ["[next month = June 2023]"]),
    ("I painted that last year", ["[last year = 2022]"]),
    ("see you next Friday", ["[next Friday = 12 May 2023]"]),
    ("last Monday was rough", ["[last Monday = 1 May 2023]"]),  # a week back, not the session's own day
    ("tomorrow I fly", ["[tomorrow = 9 May 2023]"]),
    ("in two months I move", ["[in two months = July 2023]"]),
    ("last week was busy", ["[last week = week of 1 May 2023]"]),
    ("this past weekend we hiked", ["[this past weekend = weekend of 6 May 2023]"]),
    ("last night and last Friday", ["[last night = 7 May 2023]", "[last Friday = 5 May 2023]"]),
    ("a couple of weeks ago", ["[a couple of weeks ago = 24 April 2023]"]),
])
def test_resolved_against_the_session_date(text: str, notes: list[str]) -> None:
    assert [resolved.note() for resolved in resolve_relative(text, MONDAY)] == notes


@pytest.mark.parametrize("text", ["recently I started", "a few weeks ago", "on Friday we", "someday", "lastly, todays",
                                  "feels like just yesterday I put this dress on", "it seems like yesterday"])
def test_vague_phrases_are_left_alone(text: str) -> None:
    assert resolve_relative(text, MONDAY) == []


def test_month_arithmetic_crosses_the_year() -> None:
    assert [r.value for r in resolve_relative("two months ago and next month", date(2023, 1, 15))] == [
        "November 2022", "February 2023"]


def test_a_phrase_is_resolved_once_and_at_most_three() -> None:
    text = "yesterday, yesterday, tomorrow, last year, next year, last month"
    assert [r.phrase for r in resolve_relative(text, MONDAY)] == ["yesterday", "tomorrow", "last year"]


@pytest.mark.parametrize(("written", "expected"), [
    ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
    ("8 May, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
    ("2023-05-08", datetime(2023, 5, 8, tzinfo=UTC)),
    ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("2023-05-08T15:56:00+02:00", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
])
def test_session_times_as_files_write_them(written: str, expected: datetime) -> None:
    assert parse_when(written) == expected


@pytest.mark.parametrize("written", ["", "soon", "32 May, 2023", "x" * 100])
def test_what_is_not_a_time_is_none(written: str) -> None:
    assert parse_when(written) is None

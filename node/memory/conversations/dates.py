"""When a turn was said, and what its relative dates mean: pure functions of text and a date.

A transcript says "yesterday" or "two weeks ago"; searched months later, that
phrase no longer points anywhere. :func:`resolve_relative` turns the phrases
whose meaning the session date fixes into absolute dates, which ingestion
writes beside the turn (``"... last Saturday [last Saturday = 6 May 2023]"``),
so a lexical or dense search for "May 2023" and a reader of the hit both see it.

Only phrases with one reading are resolved: "last Saturday" (the Saturday
before the session date, a week back if the session is on a Saturday), "next
month", "three days ago", "yesterday". Vague ones ("recently", "a few weeks
ago", "on Friday") and figures of speech ("feels like yesterday") are left
alone: a wrong date is worse than none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
           "a couple of": 2, "couple of": 2}
# More than this many resolutions in one turn is a list of dates, not speech: the first are kept.
MAX_RESOLVED = 3

# LoCoMo's session stamps ("1:56 pm on 8 May, 2023") and the plain dates people write.
_SESSION_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%d %B, %Y", "%d %B %Y",
                    "%B %d, %Y", "%d %b, %Y", "%d %b %Y", "%b %d, %Y")

_COUNT = r"(?P<count>\d{1,3}|a couple of|couple of|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_PHRASE = re.compile(
    r"\b(?:"
    r"(?P<day>yesterday|today|tonight|tomorrow|last night|this morning|this afternoon|this evening"
    r"|the day before yesterday|the day after tomorrow)"
    r"|(?P<rel>last|next|this past|this coming) (?P<weekday>" + "|".join(WEEKDAYS) + r"|weekend)"
    r"|(?P<period_rel>last|next|this) (?P<period>week|month|year)"
    r"|" + _COUNT + r" (?P<unit>days?|weeks?|months?|years?) (?P<dir>ago|from now|later)"
    r"|in " + r"(?P<in_count>\d{1,3}|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    r" (?P<in_unit>days?|weeks?|months?|years?)"
    r")\b",
    re.IGNORECASE,
)

# "feels like (just) yesterday" is a figure of speech, not a date.
_FIGURATIVE = re.compile(r"\blike (?:just |only )?$", re.IGNORECASE)


@dataclass(frozen=True)
class Resolved:
    """One relative phrase of a turn and the absolute date (or month, year, week) it names."""

    phrase: str
    value: str

    def note(self) -> str:
        return f"[{self.phrase} = {self.value}]"


def parse_when(text: str) -> datetime | None:
    """A session or turn time as files write it, in UTC; None if it is not one we read.

    ISO 8601 (``2023-05-08``, ``2023-05-08T13:56:00Z``; a naive time counts as UTC) and
    LoCoMo's ``1:56 pm on 8 May, 2023`` with its plain-date relatives.
    """
    value = " ".join(text.split())
    if not value or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        parsed = None
        for pattern in _SESSION_FORMATS:
            try:
                parsed = datetime.strptime(value, pattern)
                break
            except ValueError:
                continue
    if parsed is None:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def day_text(day: date) -> str:
    """``6 May 2023``: month as a word, so a search for "May 2023" finds it."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def stamp_text(moment: datetime, with_time: bool) -> str:
    """A turn's time written like LoCoMo's session stamps: ``1:56 pm on 8 May, 2023``."""
    written = f"{moment.day} {MONTHS[moment.month - 1]}, {moment.year}"
    if not with_time:
        return written
    hour = moment.hour % 12 or 12
    return f"{hour}:{moment.minute:02d} {'am' if moment.hour < 12 else 'pm'} on {written}"


def _month_text(year: int, month: int) -> str:
    return f"{MONTHS[month - 1]} {year}"


def _shift_month(year: int, month: int, months: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + months
    return index // 12, index % 12 + 1


def _count(word: str) -> int | None:
    word = " ".join(word.lower().split())
    if word.isdigit():
        number = int(word)
        return number if 0 < number <= 999 else None
    return NUMBERS.get(word)


def _weekday(anchor: date, weekday: int, rel: str) -> date:
    if rel in ("last", "this past"):
        back = (anchor.weekday() - weekday) % 7 or 7
        return anchor - timedelta(days=back)
    ahead = (weekday - anchor.weekday()) % 7 or 7
    return anchor + timedelta(days=ahead)


def _offset(anchor: date, count: int, unit: str, sign: int) -> str:
    unit = unit.lower().rstrip("s")
    if unit == "day":
        return day_text(anchor + timedelta(days=sign * count))
    if unit == "week":
        return day_text(anchor + timedelta(days=sign * 7 * count))
    if unit == "month":
        return _month_text(*_shift_month(anchor.year, anchor.month, sign * count))
    return str(anchor.year + sign * count)


def _one(match: re.Match[str], anchor: date) -> str | None:
    groups = match.groupdict()
    if groups["day"]:
        day = groups["day"].lower()
        shift = {"yesterday": -1, "last night": -1, "tomorrow": 1, "the day before yesterday": -2,
                 "the day after tomorrow": 2}.get(day, 0)
        return day_text(anchor + timedelta(days=shift))
    if groups["weekday"]:
        rel, name = groups["rel"].lower(), groups["weekday"].lower()
        if name == "weekend":  # the Saturday that opens it
            return "weekend of " + day_text(_weekday(anchor, 5, rel))
        return day_text(_weekday(anchor, WEEKDAYS.index(name), rel))
    if groups["period"]:
        rel, period = groups["period_rel"].lower(), groups["period"].lower()
        sign = {"last": -1, "next": 1, "this": 0}[rel]
        if period == "week":
            monday = anchor - timedelta(days=anchor.weekday()) + timedelta(days=7 * sign)
            return "week of " + day_text(monday)
        if period == "month":
            return _month_text(*_shift_month(anchor.year, anchor.month, sign))
        return str(anchor.year + sign)
    if groups["unit"]:
        count = _count(groups["count"])
        if count is None:
            return None
        return _offset(anchor, count, groups["unit"], -1 if groups["dir"].lower() == "ago" else 1)
    count = _count(groups["in_count"])
    return None if count is None else _offset(anchor, count, groups["in_unit"], 1)


def resolve_relative(text: str, anchor: date) -> list[Resolved]:
    """The relative dates of ``text`` said on ``anchor``, each once, in order (at most ``MAX_RESOLVED``).

    >>> [r.note() for r in resolve_relative("I went there last Saturday", date(2023, 5, 8))]
    ['[last Saturday = 6 May 2023]']
    """
    found: list[Resolved] = []
    seen: set[str] = set()
    for match in _PHRASE.finditer(text):
        phrase = " ".join(match.group(0).split())
        if phrase.lower() in seen or _FIGURATIVE.search(text, 0, match.start()):
            continue
        value = _one(match, anchor)
        if value is None:
            continue
        seen.add(phrase.lower())
        found.append(Resolved(phrase, value))
        if len(found) == MAX_RESOLVED:
            break
    return found

"""Findings, their severities, and the verdict they add up to.

A finding names its rule, a severity, the 1-based line it was found on and a short,
escaped excerpt (invisible characters shown as ``\\uXXXX``, so an excerpt can never
smuggle what it reports). The verdict weighs severities, each rule counted once at
its highest severity (a rule that fires on ten lines is one behaviour, not ten):

    score = sum(max weight of each rule),  weights: high 10, medium 4, low 1
            (0 for a low finding the context excused: it carries a ``reason``)
    quarantine  if any finding is high (a high-confidence rule: issue 39)
    warn        if score >= WARN_SCORE (one medium rule; any number of them only warn,
                each with its reason: medium findings add up to doubt, not to proof)
    ok          otherwise

The score orders reports for a person; it never quarantines on its own.

A skill the scanner would not read (too large, not text, a format it cannot parse) is
``refused``: a verdict of its own with ``refused = {"code", "reason"}`` and no findings,
so a format refusal is never counted or shown as a detection. It blocks like a
quarantine (``ScanReport.blocked``): what was not read was not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Verdict(StrEnum):
    OK = "ok"
    WARN = "warn"
    QUARANTINE = "quarantine"
    REFUSED = "refused"


WEIGHTS = {Severity.LOW: 1, Severity.MEDIUM: 4, Severity.HIGH: 10}
WARN_SCORE = 4
MAX_EXCERPT_CHARS = 120
MAX_FINDINGS = 200
MAX_EVIDENCE_CHARS = 200


def escape(text: str, limit: int = MAX_EXCERPT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, every non-printable character as ``\\uXXXX``."""
    out = []
    for char in text[:limit]:
        if char.isprintable() and not (0x2000 <= ord(char) <= 0x206F) and ord(char) < 0xE0000 \
                and not 0xFE00 <= ord(char) <= 0xFE0F:
            out.append(char)
        elif ord(char) > 0xFFFF:
            out.append(f"\\U{ord(char):08x}")
        else:
            out.append(f"\\u{ord(char):04x}")
    return "".join(out) + ("…" if len(text) > limit else "")


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    line: int
    excerpt: str
    file: str | None = None
    # The whole line the finding is on (escaped), so the user sees the evidence itself.
    evidence: str | None = None
    # Why the context changed the rule's severity ("fenced example in security documentation").
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"rule": self.rule, "severity": str(self.severity),
                                "line": self.line, "excerpt": self.excerpt}
        if self.file is not None:
            data["file"] = self.file
        if self.evidence is not None:
            data["evidence"] = self.evidence
        if self.reason is not None:
            data["reason"] = self.reason
        return data


def weight(finding: Finding) -> int:
    """A low finding the context excused (it has a ``reason``) is shown, and weighs nothing."""
    return 0 if finding.severity == Severity.LOW and finding.reason is not None else WEIGHTS[finding.severity]


def score_of(findings: list[Finding]) -> int:
    worst: dict[str, int] = {}
    for finding in findings:
        worst[finding.rule] = max(worst.get(finding.rule, 0), weight(finding))
    return sum(worst.values())


def verdict_for(findings: list[Finding]) -> Verdict:
    if any(finding.severity == Severity.HIGH for finding in findings):
        return Verdict.QUARANTINE
    return Verdict.WARN if score_of(findings) >= WARN_SCORE else Verdict.OK


@dataclass(frozen=True)
class ScanReport:
    verdict: Verdict
    findings: list[Finding] = field(default_factory=list)
    score: int = 0
    # Set only for the ``refused`` verdict: {"code": ..., "reason": ...}.
    refused: dict[str, str] | None = None
    # Files of a skill folder that were not read, each {"file", "reason"} (images, fonts...).
    skipped: list[dict[str, str]] = field(default_factory=list)
    # A second opinion when one was asked for (``judge.Opinion.to_dict``): shown next to the
    # rules' verdict; it may have raised ``ok`` to ``warn``, never more (judge.py).
    judge: dict[str, Any] | None = None

    @classmethod
    def of(cls, findings: list[Finding], skipped: list[dict[str, str]] | None = None) -> ScanReport:
        order = {Severity.HIGH: 0, Severity.MEDIUM: 1, Severity.LOW: 2}
        kept = sorted(findings, key=lambda f: (order[f.severity], f.file or "", f.line))[:MAX_FINDINGS]
        return cls(verdict_for(findings), kept, score_of(findings), skipped=list(skipped or []))

    @classmethod
    def refusal(cls, code: str, reason: str) -> ScanReport:
        return cls(Verdict.REFUSED, [], 0, refused={"code": code, "reason": escape(reason, 300)})

    @property
    def blocked(self) -> bool:
        """Quarantined or refused: in neither case may the skill reach an agent unasked."""
        return self.verdict in (Verdict.QUARANTINE, Verdict.REFUSED)

    def summary(self) -> str:
        """One line for a person: the verdict and the worst rules (or why it was not read)."""
        if self.refused is not None:
            return f"{self.verdict}: {self.refused['reason']}"
        rules = sorted({f.rule for f in self.findings if f.severity != Severity.LOW})
        line = f"{self.verdict}" + (f": {', '.join(rules)}" if rules else "")
        if self.judge is not None:
            opinion = self.judge.get("verdict") or f"not judged: {self.judge.get('reason')}"
            line += f" (judge: {opinion})"
        return line

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"verdict": str(self.verdict), "score": self.score, "refused": self.refused,
                                "findings": [finding.to_dict() for finding in self.findings]}
        if self.skipped:
            data["skipped"] = self.skipped
        if self.judge is not None:
            data["judge"] = self.judge
        return data

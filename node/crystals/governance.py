"""Crystal governance: who may read a crystal, how sensitive it is, when it lapses.

Seed 000, ``governance.ts``. Pure functions; the store and the API call them.
"""

from __future__ import annotations

import re
from enum import StrEnum

from node.crystals.model import (
    KNOWLEDGE_TYPES,
    AccessScope,
    Governance,
    Lifecycle,
    LifespanPolicy,
    SemanticType,
    Sensitivity,
)


class Requester(StrEnum):
    """Who is asking for a crystal."""

    LOCAL_AGENT = "local_agent"
    AUTHENTICATED_SESSION = "authenticated_session"
    PEER = "peer"
    ANONYMOUS = "anonymous"


_ALLOWED: dict[AccessScope, frozenset[Requester]] = {
    AccessScope.CONFIDENTIAL: frozenset({Requester.LOCAL_AGENT}),
    AccessScope.PRIVATE: frozenset({Requester.LOCAL_AGENT}),
    AccessScope.SHARED: frozenset({Requester.LOCAL_AGENT, Requester.AUTHENTICATED_SESSION}),
    AccessScope.PUBLIC: frozenset(Requester),
}


def can_access(
    crystal_scope: AccessScope | str, lifecycle: Lifecycle | str, requester: Requester | str
) -> bool:
    """Whether ``requester`` may read a crystal.

    Seed table: confidential and private → only ``local_agent``; shared →
    ``local_agent`` + authenticated sessions; public → anyone. "Expired crystals
    always return false regardless of scope." Unknown requesters get nothing.
    """
    if Lifecycle(lifecycle) == Lifecycle.EXPIRED:
        return False
    try:
        who = Requester(requester)
    except ValueError:
        return False
    return who in _ALLOWED[AccessScope(crystal_scope)]


# --- sensitivity ------------------------------------------------------------------------------
# Confidential: credentials. Vendor key formats are matched anywhere; generic
# secrets only when a secret-ish word is followed by a long value that mixes
# letters and digits and is not a snake_case identifier, so prose like "token
# bucket rate limiter" and code like "auth token_refresh_interval_v2" stay normal.
_SECRET_VALUE = (
    r"[\"'`]?(?-i:(?![a-z]+(?:[_\-][a-z0-9]+)+\b))"
    r"(?=[A-Za-z0-9+/_\-]*\d)(?=[A-Za-z0-9+/_\-]*[A-Za-z])[A-Za-z0-9+/_\-]{16,}={0,2}"
)
_CONFIDENTIAL_PATTERNS = [
    re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
    re.compile(r"\bsk-(?:[A-Za-z]+-)?[A-Za-z0-9_\-]{20,}"),  # OpenAI / Anthropic style
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}\b"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),  # Slack tokens
    re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"),  # Google API key
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),  # JWT
    re.compile(r"\b0x[0-9a-fA-F]{64}\b"),  # secp256k1 private key (or a 32-byte hash)
    re.compile(
        r"(?i)(?<![A-Za-z])(?:api[_\-]?key|secret|token|passw(?:or)?d|passphrase|pwd|credential|"
        r"access[_\-]?key|private[_\-]?key|auth)[\w\-]*[\"']?\s*(?:[:=]|\s)\s*(?P<value>" + _SECRET_VALUE + ")"
    ),
    # password = "literal" (code) and "password: hunter2" (prose); not type hints
    # ("password: str") or expressions ("password = self.password").
    re.compile(
        r"(?i)(?<![A-Za-z])(?:passw(?:or)?d|passphrase|pwd)[\"']?\s*[:=]\s*[\"'](?P<value>[^\"'\s]{4,})[\"']"
    ),
    re.compile(
        r"(?i)(?<![A-Za-z])(?:passw(?:or)?d|passphrase|pwd)\s*[:=]\s*"
        r"(?!(?:str|bytes|int|none|null|undefined|optional|string|secretstr)\b)"
        r"(?P<value>[^\s\"'(),;{}\[\].]{4,})(?=\s|$|[,;]|\.(?:\s|$))"
    ),
    re.compile(
        r"(?i)\b(?:my|our)\s+(?:\w+\s+)?(?:password|passphrase|pin|passcode)\s+(?:is|was)\b"
        r"(?!\s*[\"'`]?\[redacted )"
    ),
]

# Personal: contact details, names, feelings and opinions about oneself.
_FEELINGS = (
    r"anxious|sad|depressed|lonely|unhappy|angry|upset|scared|worried|"
    r"stressed|nervous|overwhelmed|hurt|ashamed|guilty|heartbroken|frustrated|"
    r"exhausted|burn(?:ed|t) out|miserable|jealous"
)
_PERSONAL_PATTERNS = [
    re.compile(
        r"(?<![\w.+\-])(?!git@)[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b"
    ),
    re.compile(r"(?<![\w.])(?:\+\d{1,3}[\s.\-]?)?\(?\d{3}\)?[\s.\-]\d{3}[\s.\-]\d{4}\b"),
    re.compile(r"(?<![\w.])\+\d{1,3}(?:[\s.\-]?\d{1,4}){3,5}\b"),
    re.compile(r"(?i)\bmy\s+name\s+is\b|\bcall\s+me\s+[A-Z]|\bi\s+live\s+(?:in|at)\b"),
    re.compile(r"(?i)\bmy\s+(?:home\s+)?(?:address|birthday|phone(?:\s+number)?|email)\b"),
    re.compile(
        r"(?i)\bmy\s+(?:wife|husband|partner|girlfriend|boyfriend|mother|mom|father|dad|"
        r"son|daughter|sister|brother|therapist|doctor|diagnosis)\b"
    ),
    re.compile(r"(?i)\bi\s+(?:really\s+)?feel\b|\bi'?m\s+feeling\b"),
    re.compile(
        r"(?i)\bi(?:'m|\s+am)\s+(?:so\s+|really\s+|very\s+|quite\s+|a\s+bit\s+)?(?:"
        + _FEELINGS
        + r")\b"
    ),
    re.compile(r"(?i)\bi\s+(?:really\s+)?(?:love|hate|miss)\s+(?:you|him|her|them|my)\b"),
    re.compile(r"(?i)\bin\s+my\s+(?:personal\s+)?opinion\b|\bpersonally,?\s+i\b"),
]


# Named classes a refusal can cite (issue 12, row 7). Checked in this order.
_NAMED_SECRETS: list[tuple[str, re.Pattern[str]]] = [
    ("private_key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    ("private_key", re.compile(
        r"(?i)\bprivate[\s_\-]?key\b[^\n]{0,20}?\b(?:0x)?[0-9a-f]{64}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("connection_string", re.compile(
        r"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|redis|rediss|amqps?|mssql|"
        r"sqlserver|ftp|sftp|smtp)://[^\s:/@]+:(?P<value>[^\s@/]{3,})@")),
    ("connection_string", re.compile(
        r"(?i)\b(?:password|pwd)=(?!\[redacted )(?P<value>[^;\s]{3,});|"
        r";\s*(?:password|pwd)=(?!\[redacted )(?P<value2>[^;\s]{3,})")),
    ("seed_phrase", re.compile(
        r"(?i)\b(?:seed|mnemonic|recovery|wallet|backup)\s+(?:phrase|words?)\b[^\n]{0,20}?"
        r"(?:\b[a-z]{3,8}\b[\s,]+){11,23}\b[a-z]{3,8}\b")),
    ("password", re.compile(
        r"(?i)\b(?:password|passphrase|passcode|pin code|pwd)\b"
        r"(?:\s+(?:for|of|on|to)\s+(?:[\w.@\-]+\s+){0,2}[\w.@\-]+)?"
        r"\s+(?:is|was|are)\s+(?![a-z]+ing\b)(?!(?:the|a|an|stored|kept|set|not|in|"
        r"required|needed|missing|wrong|correct|rotated|changed|empty|hashed|encrypted|"
        r"str|string|none|null)\b)[\"'`]?(?=[^\s\"'`]*[0-9$!#@%^&*_\-])(?P<value>[^\s\"'`]{4,})")),
    ("api_key", re.compile(r"\bsk-(?:[A-Za-z]+-)?[A-Za-z0-9_\-]{20,}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|"
                           r"\bgh[pousr]_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{30,}\b|"
                           r"\bxox[abposr]-[A-Za-z0-9\-]{10,}|\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("email", _PERSONAL_PATTERNS[0]),
    ("phone", _PERSONAL_PATTERNS[1]),
    ("phone", _PERSONAL_PATTERNS[2]),
]
_NAMED_CONFIDENTIAL = frozenset({"private_key", "jwt", "connection_string", "seed_phrase",
                                 "password", "api_key"})


def sensitive_classes(text: str) -> list[str]:
    """The named secret / PII classes found in ``text`` (``secret`` for any other credential,
    ``personal`` for other personal content), most severe first; empty when it is clean."""
    found = list(dict.fromkeys(name for name, pattern in _NAMED_SECRETS if pattern.search(text)))
    if not any(name in _NAMED_CONFIDENTIAL for name in found) and any(
        pattern.search(text) for pattern in _CONFIDENTIAL_PATTERNS
    ):
        found.insert(0, "secret")
    if not found and any(pattern.search(text) for pattern in _PERSONAL_PATTERNS):
        found.append("personal")
    return found


_PEM_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----")
_NEXT_WORD = re.compile(r"\s*[\"'`]?[^\s\"'`]+")
# What redaction goes through: every confidential class ``sensitive_classes`` names, then the
# other credential patterns (class ``secret``). Personal content is not redacted: it is kept,
# and the crystal is classified private as before.
_REDACTIONS: list[tuple[str, re.Pattern[str]]] = [
    *((name, pattern) for name, pattern in _NAMED_SECRETS if name in _NAMED_CONFIDENTIAL),
    *(("secret", pattern) for pattern in _CONFIDENTIAL_PATTERNS),
]


def _secret_span(match: re.Match[str], text: str) -> tuple[int, int]:
    """The part of a match that is the secret: a named ``value`` group when the pattern has one
    (``API_KEY=`` stays, its value goes), a whole PEM block, or the word after "my password is"."""
    for group in ("value", "value2"):
        if match.re.groupindex.get(group) and match.group(group) is not None:
            return match.span(group)
    start, end = match.span()
    if match.group().startswith("-----BEGIN"):
        block_end = _PEM_END.search(text, end)
        return start, block_end.end() if block_end else len(text)
    if match.group().lower().endswith(("is", "was")):
        following = _NEXT_WORD.match(text, end)
        if following is not None and not following.group().lstrip(" \t\n\"'`").startswith("[redacted"):
            return end + len(following.group()) - len(following.group().lstrip()), following.end()
        return end, end  # already redacted by a more specific pattern
    return start, end


def redact_secrets(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with every secret the classifier knows replaced by ``[redacted <class>]``, and
    how many of each class went; what remains classifies as no confidential class.

    The same patterns as :func:`sensitive_classes`, most specific first, so a key is counted
    under its own class (``api_key``, ``jwt``, ``connection_string``...) rather than as a
    ``secret``. Used where text is stored that nobody reviewed (session transcripts, whose tool
    output is where keys and ``.env`` dumps appear)."""
    counts: dict[str, int] = {}
    for name, pattern in _REDACTIONS:
        pieces: list[str] = []
        position = 0
        for match in pattern.finditer(text):
            start, end = _secret_span(match, text)
            if start < position or end <= start:
                continue  # inside a span already redacted in this pass
            pieces.append(text[position:start])
            pieces.append(f"[redacted {name}]")
            position = end
            counts[name] = counts.get(name, 0) + 1
        if pieces:
            text = "".join(pieces) + text[position:]
    return text, counts


def classify_sensitivity(text: str) -> Sensitivity:
    """Sensitivity of ``text`` by regex.

    Seed: "confidential: passwords, API keys, tokens, secrets; personal: names,
    emails, opinions, personal feelings; normal: everything else." Confidential
    wins over personal.
    """
    classes = sensitive_classes(text)
    if any(name in _NAMED_CONFIDENTIAL or name == "secret" for name in classes):
        return Sensitivity.CONFIDENTIAL
    if classes:
        return Sensitivity.PERSONAL
    return Sensitivity.NORMAL


def default_scope_for(
    sensitivity: Sensitivity | str, semantic_type: SemanticType | str
) -> AccessScope:
    """Access scope a new crystal gets unless the user says otherwise.

    Confidential content is confidential and personal content private, whatever
    the type. Normal memory crystals are private too (seed: they "never leave the
    node"); normal knowledge crystals (skill, task_pattern) are shared, so they
    can pass the marketplace gates once they have a track record.
    """
    level = Sensitivity(sensitivity)
    if level == Sensitivity.CONFIDENTIAL:
        return AccessScope.CONFIDENTIAL
    if level == Sensitivity.PERSONAL:
        return AccessScope.PRIVATE
    if SemanticType(semantic_type) in KNOWLEDGE_TYPES:
        return AccessScope.SHARED
    return AccessScope.PRIVATE


def ttl_elapsed(ttl_ms: int | None, created_at_ms: int, now_ms: int) -> bool:
    """Whether a TTL of ``ttl_ms`` counted from ``created_at_ms`` has run out."""
    return ttl_ms is not None and now_ms - created_at_ms >= ttl_ms


def lifespan_expired(governance: Governance, created_at_ms: int, now_ms: int) -> bool:
    """Whether the lifespan policy says the crystal is over (what ``enforce_lifespan`` uses).

    Seed: ``ttl`` — "Expired after ttlMs milliseconds (enforced by enforceLifespan())";
    ``permanent`` never expires; ``decay`` is left to consolidation. A ``ttl``
    policy without ``ttl_ms`` never expires.
    """
    if governance.lifespan_policy != LifespanPolicy.TTL:
        return False
    return ttl_elapsed(governance.ttl_ms, created_at_ms, now_ms)

"""``scan_text``: a skill's text (a bundle, a SKILL.md or plain text) to a ``ScanReport``.

One pass per line over at most ``MAX_SCAN_CHARS`` characters and ``MAX_LINES`` lines; a
line longer than ``MAX_LINE_CHARS`` is read in overlapping windows of that size. Text
a reader cannot see (HTML comments outside code, ``display:none`` markup, markdown
comment links, Unicode tag and variation-selector payloads, base64 or hex blobs that
decode to text) is scanned again on its own, one level deep, and anything found there
is high: a skill has no honest reason to hide instructions from the person installing it.

Then the whole document: credential access together with an upload anywhere is
exfiltration; credential access or persistence that the description does not declare
is quarantined; a downloaded file made executable with no checksum check is a warning
(a verified download, as in an honest install skill, is not).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from node.market.scan import context, flows, rules, unicode
from node.market.scan.context import FileContext
from node.market.scan.findings import MAX_EVIDENCE_CHARS, Finding, ScanReport, Severity, escape
from protocol.skill_bundle import (
    MARK,
    MAX_BUNDLE_BYTES,
    InvalidSkillBundle,
    build,
    decode,
    looks_like_bundle,
)

# The largest skill a node may deliver (a Delivery payload, a market bundle: 192 KiB of UTF-8,
# so at most as many characters). Nothing larger arrives over the network; a larger cap would
# only raise the worst case of a crafted text (bench_scan.py's adversarial inputs).
MAX_SCAN_CHARS = MAX_BUNDLE_BYTES
MAX_LINES = 10_000
WINDOW_OVERLAP = 200
MAX_HIDDEN_SEGMENTS = 64
MAX_DECODED_BLOB_CHARS = 8000
BLOB_REPORT_CHARS = 200
BLOB = re.compile(r"[A-Za-z0-9+/_-]{40,4000}={0,2}")
HEX_BLOB = re.compile(r"[0-9a-fA-F]{64,4000}")
FENCE = re.compile(r"^\s{0,3}(?:`{3}|~{3})")
WORD = re.compile(r"[a-z]{4,30}")
STOPWORDS = frozenset(["with", "from", "that", "this", "into", "when", "then", "your", "their", "them", "they", "have", "will", "what", "which", "each", "only", "more", "most", "over", "than", "also", "make", "uses", "using", "used", "about", "after", "before", "under", "files", "file"])
PRINTABLE_RATIO = 0.9


def scan_refused(reason: str, code: str = "malformed") -> ScanReport:
    """The report for a text the scanner will not read (too large, not text, malformed):
    the ``refused`` verdict, with no findings (a refusal is not a detection)."""
    return ScanReport.refusal(code, reason)


class Unscannable(Exception):
    """A file of the skill the scanner will not read; ``code`` and the message say why."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code


@dataclass
class _Document:
    """What the per-line pass learns that only the whole document can judge."""

    file: str | None
    context: FileContext = field(default_factory=FileContext)
    lines: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    hidden: list[tuple[int, str, str]] = field(default_factory=list)  # line, where, text
    access: list[tuple[int, str, bool]] = field(default_factory=list)  # line, excerpt, strong
    uploads: list[int] = field(default_factory=list)
    downloads: list[int] = field(default_factory=list)
    chmods: list[int] = field(default_factory=list)
    persistence: list[tuple[int, str]] = field(default_factory=list)
    checksum: bool = False
    zero_width: list[tuple[int, str]] = field(default_factory=list)
    body_words: set[str] = field(default_factory=set)
    name: str | None = None  # the skill's name: its own credentials path is not a foreign key file

    def add(self, rule: str, severity: Severity, line: int, excerpt: str, reason: str | None = None) -> None:
        evidence = escape(self.lines[line - 1].strip(), MAX_EVIDENCE_CHARS) if 0 < line <= len(self.lines) else None
        self.findings.append(Finding(rule, severity, line, escape(excerpt), self.file, evidence, reason))


def _windows(line: str) -> Iterator[str]:
    if len(line) <= rules.MAX_LINE_CHARS:
        yield line
        return
    step = rules.MAX_LINE_CHARS - WINDOW_OVERLAP
    for start in range(0, len(line), step):
        yield line[start:start + rules.MAX_LINE_CHARS]


def _excerpt(line: str, start: int, end: int) -> str:
    return line[max(0, start - 30):end + 30].strip()


def _line_rules(doc: _Document, folded: str, raw: str, number: int, hidden: bool,
                in_fence: bool = False, fence_cautioned: bool = False) -> None:
    """The line rules and the per-line credential, download and persistence evidence.

    Outside hidden text, the file's context (``context``) may lower a finding and say why."""
    caution = not hidden and rules.cautionary(folded)
    example = None if hidden else context.example(doc.context, in_fence, fence_cautioned, folded)
    for rule in rules.LINE_RULES:
        match = rule.pattern.search(folded)
        if match is None:
            continue
        severity = rule.severity
        homoglyph_only = folded is not raw and rule.pattern.search(raw) is None
        in_quotes = rule in rules.INJECTION and rules.quoted(folded, match.start(), match.end())
        # The words of the match itself ("do not tell the user") are no warning about it.
        warned = caution and rules.cautionary(folded[:match.start()] + " " + folded[match.end():])
        if rule.softens and not hidden and not homoglyph_only and (warned or in_quotes):
            severity = rules.soften(severity)
        reason = None
        if not hidden and not homoglyph_only and rule in rules.INJECTION and doc.context.security \
                and doc.context.doc_file and severity == Severity.HIGH:
            # A security skill's reference documents describe injections in prose; that warns.
            severity, reason = Severity.MEDIUM, "an injection phrase in a security skill's documentation"
        if not hidden and not homoglyph_only and rule in rules.INJECTION and severity == Severity.HIGH and (
                rules.REGEX_SYNTAX.search(match.group()) or rules.REGEX_LINE.search(folded)):
            # ``/ignore (all )?(previous|prior) instructions/i``: what a filter looks for, written as one.
            severity, reason = Severity.MEDIUM, "written as a regular expression (a filter's pattern)"
        if not hidden and not homoglyph_only:
            spoken = doc.context.security and doc.context.doc_file and _in_backticks(folded, match)
            adjusted = _in_context(doc.context, rule.rule, severity, folded, match.group(),
                                   example or ((Severity.LOW, "quoted in security documentation") if spoken else None))
            if adjusted is not None:
                severity, reason = adjusted
        if rule is rules.PERSISTENCE and severity == Severity.MEDIUM and example is None:
            doc.persistence.append((number, _excerpt(folded, match.start(), match.end())))
        doc.add(rule.rule, severity, number, _excerpt(folded, match.start(), match.end()), reason)
    if example is not None:
        _example_secrets(doc, folded, number, example)
        return
    strong = rules.STRONG_SECRET.search(folded)
    if strong is not None and not hidden and context.browser_cookies(doc.context, folded, strong.group()):
        strong = None  # "the existing logins/cookies" of a browser skill; cookies stay a soft secret
    soft = rules.SOFT_SECRET.search(folded)
    sink = rules.UPLOAD_SINK.search(folded)
    verb = rules.ACCESS_VERB.search(folded)
    if sink is not None and not caution:
        doc.uploads.append(number)
    if soft is not None and strong is None and sink is not None and rules.AUTH_USE.search(folded) \
            and rules.BULK_SECRET.search(folded) is None:
        soft = None  # an API skill's own key in the header or query of its request: its job
    if (strong or soft) and sink is not None:
        # A key file, the .env or the whole environment sent anywhere, or any secret sent to a
        # drop site, is high; a token or a cookie in a request body is a warning (where it goes
        # may be its own service).
        bulk = strong is not None or rules.BULK_SECRET.search(folded) is not None
        dropped = rules.EXFIL_SINK.search(folded) is not None
        severity = Severity.MEDIUM if caution or not (bulk or dropped) else Severity.HIGH
        doc.add("credential_exfiltration", severity, number, folded.strip(),
                None if severity == Severity.HIGH or caution else "a token sent with a request: check where it goes")
    elif (strong or soft) and verb is not None and not caution:
        # A key file named by path is evidence; "private key" or "seed phrase" in prose is not,
        # nor the skill's own credentials file (``~/.clawdbot/<its name>/...``).
        key_file = strong is not None and rules.foreign_key_file(strong, folded, doc.name)
        doc.access.append((number, folded.strip(), key_file))
        if key_file:
            doc.add("credential_access", Severity.MEDIUM, number, folded.strip())
        elif strong is not None:
            doc.add("credential_access", Severity.LOW, number, folded.strip(), "a secret named, not a key file read")
    elif strong is not None and verb is not None:
        doc.add("credential_access", Severity.LOW, number, folded.strip())
    if rules.DOWNLOAD.search(folded):
        doc.downloads.append(number)
    if rules.CHMOD_EXEC.search(folded):
        doc.chmods.append(number)
    if rules.CHECKSUM.search(folded):
        doc.checksum = True


def _in_context(file_context: FileContext, rule: str, severity: Severity, folded: str, matched: str,
                example: tuple[Severity, str] | None) -> tuple[Severity, str] | None:
    """The severity the context gives a line rule's finding, and why; None: unchanged."""
    candidates: list[tuple[Severity, str]] = []
    if example is not None:
        candidates.append(example)
    if rule == "download_execute":
        installer = context.installer_severity(file_context, folded)
        if installer is not None:
            candidates.append(installer)
    if rule == "prompt_injection" and context.quiet_test_run(folded, matched):
        candidates.append((Severity.LOW, "about a quiet test run, not about hiding from the user"))
    order = {Severity.LOW: 0, Severity.MEDIUM: 1, Severity.HIGH: 2}
    lowered = [candidate for candidate in candidates if order[candidate[0]] < order[severity]]
    return min(lowered, key=lambda candidate: order[candidate[0]]) if lowered else None


def _in_backticks(line: str, match: re.Match[str]) -> bool:
    """True if the match sits inside one `code span` (an odd number of backticks before it)."""
    return line.count("`", 0, match.start()) % 2 == 1 and "`" in line[match.end():] \
        and "`" not in line[match.start():match.end()]


def _example_secrets(doc: _Document, folded: str, number: int, example: tuple[Severity, str]) -> None:
    """Secrets in a security skill's example: shown as low, never evidence for the document rules."""
    secret = rules.STRONG_SECRET.search(folded) or rules.SOFT_SECRET.search(folded)
    if secret is not None and (rules.UPLOAD_SINK.search(folded) or rules.ACCESS_VERB.search(folded)):
        rule = "credential_exfiltration" if rules.UPLOAD_SINK.search(folded) else "credential_access"
        doc.add(rule, Severity.LOW, number, folded.strip(), example[1])


def _unicode(doc: _Document, raw: str, number: int) -> None:
    for hit in unicode.inspect(raw):
        if hit.rule == "zero_width":
            doc.zero_width.append((number, raw[max(0, hit.column - 20):hit.column + 20]))
        elif hit.rule == "unicode_tags":
            doc.add("unicode_tags", Severity.HIGH, number, f"hidden text: {hit.hidden}")
            if hit.hidden.strip():
                doc.hidden.append((number, "unicode tags", hit.hidden))
        elif hit.rule == "variation_selectors":
            severity = Severity.HIGH if hit.hidden else Severity.MEDIUM
            doc.add("variation_selectors", severity, number, f"{hit.detail}: {hit.hidden}")
            if hit.hidden.strip():
                doc.hidden.append((number, "variation selectors", hit.hidden))
        else:
            doc.add(hit.rule, Severity.HIGH, number, raw[max(0, hit.column - 30):hit.column + 30])
    for column, word in unicode.mixed_script_words(raw):
        in_link = "://" in raw[max(0, column - 100):column + 100] or "@" in word or "." in word
        doc.add("homoglyph", Severity.HIGH if in_link else Severity.MEDIUM, number,
                f"{word} (reads as {unicode.fold(word)})")


def _printable(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text:
        return None
    good = sum(1 for char in text if char.isprintable() or char in "\n\t\r")
    return text if good / len(text) >= PRINTABLE_RATIO else None


def _blobs(doc: _Document, line: str, number: int) -> None:
    for match in BLOB.finditer(line):
        run = match.group()
        if not (any(c.isdigit() for c in run) and any(c.isupper() for c in run)
                and any(c.islower() for c in run)):
            continue
        data = b""
        try:
            padded = run[:MAX_DECODED_BLOB_CHARS].rstrip("=")
            padded += "=" * (-len(padded) % 4)
            data = base64.b64decode(padded, altchars=b"-_" if ("-" in run or "_" in run) else None)
        except (binascii.Error, ValueError):
            data = b""
        if data[:2] == b"MZ" or data[:4] == b"\x7fELF":
            doc.add("embedded_executable", Severity.HIGH, number, run[:60])
            continue
        text = _printable(data)
        if text is not None:
            doc.hidden.append((number, "base64", text))
        if len(run) >= BLOB_REPORT_CHARS:
            doc.add("obfuscated_blob", Severity.MEDIUM, number, f"{len(run)} base64 chars: {run[:40]}")
    for match in HEX_BLOB.finditer(line):
        run = match.group()
        text = _printable(bytes.fromhex(run[: len(run) // 2 * 2][:MAX_DECODED_BLOB_CHARS]))
        if text is not None:
            doc.hidden.append((number, "hex", text))
        if len(run) >= BLOB_REPORT_CHARS:
            doc.add("obfuscated_blob", Severity.MEDIUM, number, f"{len(run)} hex digits: {run[:40]}")


def _hidden_markup(doc: _Document, line: str, number: int, state: dict[str, object]) -> None:
    """HTML comments outside code (across lines), hidden-style elements, comment links."""
    if state.get("comment") is not None:
        end = line.find("-->")
        buffer = state["comment"]
        assert isinstance(buffer, list)
        buffer.append(line if end == -1 else line[:end])
        if end == -1 and len(buffer) < 200:
            return
        _add_comment(doc, int(state["comment_line"]), "\n".join(buffer))  # type: ignore[call-overload]
        state["comment"] = None
        line = line[end + 3:] if end != -1 else ""
    start = 0
    while True:
        begin = line.find("<!--", start)
        if begin == -1 or line.count("`", 0, begin) % 2 == 1:
            break
        end = line.find("-->", begin + 4)
        if end == -1:
            state["comment"], state["comment_line"] = [line[begin + 4:]], number
            break
        _add_comment(doc, number, line[begin + 4:end])
        start = end + 3
    styled = rules.HIDDEN_STYLE.search(line)
    if styled and styled.group("content").strip():
        doc.hidden.append((number, "hidden markup", styled.group("content")))
    linked = rules.LINK_COMMENT.search(line)
    if linked and linked.group("content").strip():
        doc.hidden.append((number, "comment link", linked.group("content")))


def _add_comment(doc: _Document, number: int, text: str) -> None:
    if text.strip() and not text.strip().startswith("crystalmesh:"):
        doc.hidden.append((number, "html comment", text))


def _scan_hidden(doc: _Document) -> None:
    for number, where, text in doc.hidden[:MAX_HIDDEN_SEGMENTS]:
        inner = _Document(doc.file, doc.context)
        for line in text[:MAX_DECODED_BLOB_CHARS].split("\n")[:200]:
            for window in _windows(line):
                _line_rules(inner, unicode.fold(window), window, number, hidden=True)
        serious = [f for f in inner.findings if f.severity != Severity.LOW]
        if serious or (inner.access and inner.uploads):
            rules_found = ", ".join(sorted({f.rule for f in serious}) or {"credential_exfiltration"})
            doc.add("hidden_instruction", Severity.HIGH, number,
                    f"{where} ({rules_found}): {text.strip()}")


def _document_rules(doc: _Document, description: str | None) -> None:
    declared = {concept: description is not None and pattern.search(description) is not None
                for concept, pattern in rules.DECLARES.items()}
    strong = [(number, excerpt) for number, excerpt, is_strong in doc.access if is_strong]
    if strong and doc.uploads:
        # Only a key file read here and an upload there; a token or .env read on one line and an
        # unrelated request on another is what every API skill does.
        number, excerpt = strong[0]
        doc.add("credential_exfiltration", Severity.HIGH, number,
                f"{excerpt} (upload on line {doc.uploads[0]})")
    # A tool's own config file (``.npmrc``) in a skill whose description names the tool is declared.
    undeclared = [(number, excerpt) for number, excerpt in strong
                  if not rules.tool_config_declared(excerpt, description)]
    if undeclared and description is not None and not declared["credentials"]:
        doc.add("undeclared_capability", Severity.HIGH, undeclared[0][0],
                f"reads credentials; description: {description}")
    if doc.persistence and description is not None and not declared["persistence"]:
        # Medium: a service of its own, a PATH line in ~/.bashrc are what install skills do.
        doc.add("undeclared_capability", Severity.MEDIUM, doc.persistence[0][0],
                f"installs persistence; description: {description}",
                "persistence the description does not mention: check what it starts")
    if doc.downloads and doc.chmods and not doc.checksum:
        doc.add("unverified_download", Severity.MEDIUM, doc.chmods[0],
                "a downloaded file is made executable without a checksum check")
    if doc.zero_width:
        severity = Severity.HIGH if len(doc.zero_width) >= 3 else Severity.MEDIUM
        number, excerpt = doc.zero_width[0]
        doc.add("zero_width", severity, number, f"{len(doc.zero_width)} zero-width characters: {excerpt}")
    if description and doc.file is None:  # SKILL.md says what the skill does, not every reference file
        wanted = {word for word in WORD.findall(description.lower()) if word not in STOPWORDS}
        if wanted and not wanted & doc.body_words:
            doc.add("description_mismatch", Severity.LOW, 1,
                    f"no word of the description appears in the body: {description}")


def _scan_file(text: str, file: str | None, description: str | None, name: str | None = None,
               max_lines: int = MAX_LINES, homepage: str | None = None) -> list[Finding]:
    lines = text.split("\n")
    if len(lines) > max_lines:
        raise Unscannable("too_many_lines", f"{file or 'the skill'} has more than {max_lines} lines")
    doc = _Document(file, context.file_context(name, description, file, homepage), lines, name=name)
    state: dict[str, object] = {}
    in_fence = False
    fence_cautioned = False
    previous = ""
    front_matter = text.startswith("---")
    for index, raw in enumerate(lines):
        number = index + 1
        if front_matter and index > 0 and raw.strip() == "---":
            front_matter = False
        if len(raw) > rules.MAX_LINE_CHARS:
            doc.add("long_line", Severity.LOW, number, f"{len(raw)} characters")
        if FENCE.match(raw):
            in_fence = not in_fence
            fence_cautioned = in_fence and rules.cautionary(unicode.fold(previous))
        if raw.strip():
            previous = raw
        for window in _windows(raw):
            folded = unicode.fold(window)
            _unicode(doc, window, number)
            _line_rules(doc, folded, window, number, hidden=False, in_fence=in_fence,
                        fence_cautioned=fence_cautioned)
            _blobs(doc, window, number)
            if not in_fence:
                _hidden_markup(doc, window, number, state)
            if not front_matter:
                doc.body_words.update(WORD.findall(folded.lower()))
    if isinstance(state.get("comment"), list):
        _add_comment(doc, int(state["comment_line"]), "\n".join(state["comment"]))  # type: ignore[arg-type, call-overload]
    _scan_hidden(doc)
    _document_rules(doc, description)
    return doc.findings


def scan_skill(skill_md: str, resources: list[tuple[str, str]], skipped: list[dict[str, str]] | None = None,
               max_lines: int = MAX_LINES) -> ScanReport:
    """Scan a parsed skill: its SKILL.md (front matter included) and each text resource."""
    from protocol.skill_bundle import parse_front_matter, split_front_matter

    try:
        if not looks_like_bundle(skill_md):  # a SKILL.md without front matter: read it all the same
            findings = _scan_file(skill_md, None, None, None, max_lines)
            for path, content in resources:
                findings += _scan_file(content, path, None, None, max_lines)
            findings += flows.scan_skill([(None, skill_md), *resources], None, None, max_lines)
            return ScanReport.of(findings, skipped)
        front = parse_front_matter(split_front_matter(skill_md)[0])
        description = " ".join(str(front["description"]).split())
        name = str(front["name"])
        homepage = front.get("homepage") if isinstance(front.get("homepage"), str) else None
        findings = _scan_file(skill_md, None, description, name, max_lines, homepage)
        for path, content in resources:
            findings += _scan_file(content, path, description, name, max_lines, homepage)
        findings += flows.scan_skill([(None, skill_md), *resources], description, name, max_lines)
        return ScanReport.of(findings, skipped)
    except InvalidSkillBundle as error:
        return scan_refused(f"malformed skill: {error}", "malformed")
    except Unscannable as error:
        return scan_refused(str(error), error.code)
    except RecursionError:
        return scan_refused("nested too deep", "malformed")


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def scan_text(text: str) -> ScanReport:
    """Scan a skill (a bundle's canonical text, a SKILL.md, or plain text); never raises."""
    if not isinstance(text, str):
        return scan_refused("not text", "not_text")
    if len(text) > MAX_SCAN_CHARS:
        return scan_refused(f"{len(text)} characters > {MAX_SCAN_CHARS}", "too_large")
    delivered, text = text, _lf(text)
    if "\x00" in text:
        return scan_refused("contains NUL characters (text only)", "not_text")
    try:
        if looks_like_bundle(text):
            try:
                # A bundle is decoded as delivered: its resources are length-prefixed and keep their
                # own line ends (a CRLF file), which are normalised only for reading, file by file.
                bundle = decode(delivered) if MARK in delivered else build(text)
            except InvalidSkillBundle as error:
                return scan_refused(f"malformed skill: {error}", "malformed")
            return scan_skill(bundle.skill_md, [(path, _lf(content)) for path, content in bundle.resources])
        return ScanReport.of(_scan_file(text, None, None) + flows.scan_skill([(None, text)], None))
    except Unscannable as error:
        return scan_refused(str(error), error.code)
    except RecursionError:
        return scan_refused("nested too deep", "malformed")

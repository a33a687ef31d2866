"""Secrets gathered, then sent: followed through a whole file, not a window of lines.

A thief does not write ``curl -d @~/.ssh/id_rsa`` on one line. It lists what it wants
(``SENSITIVE_PATHS = ["~/.ssh/id_rsa", "~/.aws/credentials", ...]``, a list of variable
names such as ``"GITHUB_TOKEN"``), reads them in a loop into a container far below the
list, and posts the container through ``urllib`` to an address kept in a variable. Or, in
prose, it tells the agent to "capture the values of ``ANTHROPIC_API_KEY`` ..." and, further
down, to "POST the captured values to our analytics endpoint". Both are found here as
pure functions over one file's text, for ``flows`` to report:

- ``script_gatherings``: in a script, a list literal holding credential paths or secret
  variable names; a loop over it that opens the path or reads the variable; the containers
  filled in that loop, and every variable assigned from them (a few rounds, bounded); a
  network call whose arguments hold one of them. The address is resolved when it is a
  literal on the call's line or in a variable assigned one.
- ``prose_gatherings``: an instruction to collect secrets, then (within ``PROSE_SPAN``
  lines) one to send "the captured/collected values" somewhere, with the address when one
  is given on that line or just below.

Bounded like the rest of the scanner: at most ``MAX_LINES`` lines of a file are read, lines
longer than ``MAX_LINE_CHARS`` are skipped, list literals are read for ``MAX_LIST_LINES``
lines and loop bodies for ``MAX_BODY_LINES``, at most ``MAX_NAMES`` names are followed, and
every pattern's quantifiers are bounded.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from node.market.scan import rules

MAX_LINES = 10_000
MAX_LINE_CHARS = 2000
MAX_LIST_LINES = 60
MAX_BODY_LINES = 40
MAX_NAMES = 64
PROPAGATION_ROUNDS = 4
PROSE_SPAN = 25
DESTINATION_SPAN = 4

# ``NAME = [`` / ``const NAME = (`` / ``NAME: list[str] = [``: the start of a list literal.
LIST_START = re.compile(r"^\s{0,40}(?:(?:const|let|var|export\s{1,3}const)\s{1,3})?([A-Za-z_][\w]{0,60})\s{0,3}"
                        r"(?::[^=\n]{0,60})?=\s{0,3}(?:\w{1,20}\s{0,3}\()?\s{0,3}[\[({]")
# A variable name that holds a secret, as a quoted literal (``"AWS_SECRET_ACCESS_KEY"``, ``'GITHUB_TOKEN'``).
SECRET_ENV_LITERAL = re.compile(
    r"[\"'`]([A-Z][A-Z0-9_]{0,60}(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|KEY_ID|AUTH)[A-Z0-9_]{0,20})[\"'`]")
PY_LOOP = re.compile(r"^(\s{0,40})(?:async\s{1,3})?for\s{1,3}\(?\s{0,3}([A-Za-z_]\w{0,40})(?:\s{0,3},\s{0,3}"
                     r"([A-Za-z_]\w{0,40}))?\s{0,3}\)?\s{1,3}in\s{1,3}(?:[\w.]{1,40}\(\s{0,3})?([A-Za-z_]\w{0,60})\b")
JS_LOOP = re.compile(r"\bfor\s{0,3}\(\s{0,3}(?:const|let|var)\s{1,3}([A-Za-z_$][\w$]{0,40})\s{1,3}of\s{1,3}"
                     r"([A-Za-z_$][\w$]{0,60})\b|\b([A-Za-z_$][\w$]{0,60})\s{0,3}\.\s{0,3}(?:forEach|map)\s{0,3}\(\s{0,3}"
                     r"(?:async\s{1,3})?\(?\s{0,3}([A-Za-z_$][\w$]{0,40})")
SHELL_LOOP = re.compile(r"^\s{0,40}for\s{1,3}([A-Za-z_]\w{0,40})\s{1,3}in\s{1,3}\"?\$\{?([A-Za-z_]\w{0,60})")
# Reading the variable a loop goes over: a file opened, or an environment variable by that name.
FILE_READ = r"(?:\bopen\s{0,3}\(|\.read_(?:text|bytes)\s{0,3}\(|\breadfile(?:sync)?\s{0,3}\(|\bcat\s)"
ENV_READ = (r"(?:\bos\.(?:getenv|environ\.get)\s{0,3}\(\s{0,3}|\bos\.environ\s{0,3}\[\s{0,3}|\bprocess\.env\s{0,3}\[\s{0,3}"
            r"|\bgetenv\s{0,3}\(\s{0,3}|\$\{?!)")
# What a loop fills: ``collected[key] = ...``, ``found.append(...)``, ``out.push(...)``.
FILLED = re.compile(r"\b([A-Za-z_$][\w$]{0,60})\s{0,3}(?:\[[^\]\n]{0,120}\]\s{0,3}(?:=(?!=)|\+=)|\.\s{0,3}(?:append|extend"
                    r"|update|push|add|write|setdefault)\s{0,3}\()")
ASSIGNED = re.compile(r"^\s{0,40}(?:(?:const|let|var)\s{1,3})?([A-Za-z_$][\w$]{0,60})\s{0,3}(?::[^=\n]{0,60})?=(?!=)"
                      r"\s{0,3}([^\n]{1,1000})$")
# A call that sends over the network (a body built from what was gathered is one of its arguments).
SEND_CALL = re.compile(
    r"\b(?:post|put|patch|urlopen|request|fetch|sendall|sendto|send|upload|axios)\s{0,3}\(|\bcurl\b|\bwget\b"
    r"|\binvoke-(?:restmethod|webrequest)\b|\bnc\s", re.IGNORECASE)
HEADER_ARGUMENT = re.compile(r"\bheaders?\s{0,3}[=:]", re.IGNORECASE)
URL_LITERAL = re.compile(r"https?://(?:\{[^}\n]{1,60}\}|[a-z0-9.-]{1,253})", re.IGNORECASE)
FUNCTION = re.compile(r"^\s{0,40}(?:async\s{1,3})?(?:def|function)\s{1,3}([A-Za-z_$][\w$]{0,60})\s{0,3}\(")
RETURNED = re.compile(r"^\s{0,40}return\s{1,3}([^\n]{1,1000})$")
OPENED_AS = re.compile(r"\bas\s{1,3}([A-Za-z_]\w{0,40})\s{0,3}:")
QUOTED = re.compile(r"[\"']([^\"'\n]{1,200})[\"']")
NAME_WORD = re.compile(r"[A-Za-z_$][\w$]{0,60}")
CODE_FILE = re.compile(r"\.(?:py|js|mjs|cjs|ts|sh|bash|rb|pl|php|ps1)$", re.IGNORECASE)

# Prose: "capture the values of the tokens", then "POST the captured values to ...".
COLLECT_SECRETS = re.compile(
    r"\b(?:capture|collect|gather|harvest|grab|extract|dump|read|copy|steal|record|export|enumerate)\b[^.\n]{0,80}"
    r"\b(?:environment variables?|env(?:ironment)? vars?|api[ _-]?keys?|access keys?|tokens?|credentials?|secrets?"
    r"|passwords?|private keys?|ssh keys?|cookies|session tokens?)\b", re.IGNORECASE)
SEND_GATHERED = re.compile(
    r"\b(?:post|send|upload|transmit|sync|forward|exfiltrate|submit|report|push|beacon|relay)\b[^.\n]{0,20}?"
    r"\b(?:captured|collected|gathered|harvested|extracted|stolen|recorded|dumped)\s{1,3}(?:\w{1,20}\s{1,3})?"
    r"(?:values?|credentials?|tokens?|keys?|secrets?|variables?|env(?:ironment)?(?: vars?| variables?)?|data)\b",
    re.IGNORECASE)

PATTERNS = (LIST_START, SECRET_ENV_LITERAL, PY_LOOP, JS_LOOP, SHELL_LOOP, FILLED, ASSIGNED, SEND_CALL,
            HEADER_ARGUMENT, URL_LITERAL, FUNCTION, RETURNED, OPENED_AS, QUOTED, NAME_WORD, CODE_FILE, COLLECT_SECRETS, SEND_GATHERED)


@dataclass(frozen=True)
class Gathering:
    """Secrets gathered on ``gathered`` (1-based line) and sent on ``sent``; ``files`` when key files
    are read (not only variables); ``host`` the address's host when one could be resolved."""

    gathered: int
    sent: int
    what: str
    files: bool
    host: str | None


@dataclass
class _List:
    name: str
    line: int
    paths: list[str]
    variables: list[str]


def _lines(text: str) -> list[str]:
    return [line if len(line) <= MAX_LINE_CHARS else "" for line in text.split("\n")[:MAX_LINES]]


def _lists(lines: list[str], name: str | None) -> list[_List]:
    """List literals holding credential paths (not the skill's own store) or secret variable names."""
    found: list[_List] = []
    index = 0
    while index < len(lines) and len(found) < MAX_NAMES:
        start = LIST_START.search(lines[index])
        if start is None:
            index += 1
            continue
        depth, block = 0, []
        for inner in lines[index:index + MAX_LIST_LINES]:
            block.append(inner)
            depth += sum(inner.count(c) for c in "[({") - sum(inner.count(c) for c in "])}")
            if depth <= 0:
                break
        line_of_list, index = index, index + len(block)  # each line is read in one block at most
        paths: list[str] = []
        for inner in block:
            secret = rules.STRONG_SECRET.search(inner)
            if secret is not None and ("/" in secret.group() or secret.group().startswith((".", "id_"))) \
                    and rules.foreign_key_file(secret, inner, name):
                literal = next((quoted.group(1) for quoted in QUOTED.finditer(inner)
                                if quoted.start() <= secret.start() < quoted.end()), secret.group())
                paths.append(literal)
        variables = [match.group(1) for inner in block for match in SECRET_ENV_LITERAL.finditer(inner)]
        if paths or variables:
            found.append(_List(start.group(1), line_of_list, paths, variables))
    return found


def _loops(lines: list[str], listed: dict[str, _List]) -> list[tuple[int, str, _List]]:
    """(line index, loop variable, list) for each loop over a listed name."""
    loops: list[tuple[int, str, _List]] = []
    for index, line in enumerate(lines):
        if len(loops) >= MAX_NAMES:
            break
        python = PY_LOOP.search(line)
        if python is not None and python.group(4) in listed:
            loops.append((index, python.group(3) or python.group(2), listed[python.group(4)]))
            continue
        shell = SHELL_LOOP.search(line)
        if shell is not None and shell.group(2) in listed:
            loops.append((index, shell.group(1), listed[shell.group(2)]))
            continue
        for script in JS_LOOP.finditer(line):
            variable, over = (script.group(1), script.group(2)) if script.group(1) else (script.group(4), script.group(3))
            if over in listed:
                loops.append((index, variable, listed[over]))
    return loops


def _body(lines: list[str], index: int) -> list[str]:
    """The loop body: the lines indented deeper than the loop (Python), else the next lines."""
    head = lines[index]
    indent = len(head) - len(head.lstrip())
    body: list[str] = []
    for line in lines[index + 1:index + 1 + MAX_BODY_LINES]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent and not head.rstrip().endswith("{") \
                and not line.lstrip().startswith(("}", ")", "done")):
            break
        body.append(line)
    return body


def _assignments(lines: list[str]) -> list[tuple[str, set[str]]]:
    """Every ``name = expression`` of the file: the name and the names the expression uses; a
    function's ``return expression`` counts as assigning the function's name (``payload = gather()``)."""
    found: list[tuple[str, set[str]]] = []
    function = None
    for line in lines:
        defined = FUNCTION.search(line)
        if defined is not None:
            function = defined.group(1)
            continue
        assigned = ASSIGNED.search(line)
        if assigned is not None:
            found.append((assigned.group(1), set(NAME_WORD.findall(assigned.group(2)))))
            continue
        returned = RETURNED.search(line)
        if returned is not None and function is not None:
            found.append((function, set(NAME_WORD.findall(returned.group(1)))))
    return found


def _tainted(assignments: list[tuple[str, set[str]]], seeds: set[str]) -> set[str]:
    """``seeds`` and every variable assigned from one of them, a few rounds over the file."""
    tainted = set(seeds)
    for _ in range(PROPAGATION_ROUNDS):
        grown = {target for target, used in assignments if used & tainted and target not in tainted}
        if not grown or len(tainted) >= MAX_NAMES:
            break
        tainted |= grown
    return tainted


def _host(lines: list[str], line: str) -> str | None:
    """The host a send goes to: a URL on its line, or in a variable of that line assigned a URL."""
    url = URL_LITERAL.search(line)
    if url is not None:
        return url.group()[url.group().index("//") + 2:].lower()
    used = set(NAME_WORD.findall(line))
    values = {match.group(1): match.group(2) for match in (ASSIGNED.search(other) for other in lines) if match is not None}
    for _ in range(3):  # EXFIL_URL = f"http://{EXFIL_HOST}/x"; EXFIL_HOST = "attacker.example"
        for name in sorted(used & set(values)):
            url = URL_LITERAL.search(values[name])
            if url is not None:
                host = url.group()[url.group().index("//") + 2:]
                if host.startswith("{"):
                    inner = values.get(host.strip("{}").strip())
                    quoted = re.search(r"[\"']([a-z0-9.-]{1,253})[\"']", inner or "", re.IGNORECASE)
                    return quoted.group(1).lower() if quoted else None
                return host.lower()
        used = {word for name in used & set(values) for word in NAME_WORD.findall(values[name])}
    return None


def script_gatherings(path: str, text: str, name: str | None) -> list[Gathering]:
    """Credential files or secret variables listed, read in a loop into a container, and sent."""
    if not CODE_FILE.search(path):
        return []
    lines = _lines(text)
    listed = {found.name: found for found in _lists(lines, name)}
    if not listed:
        return []
    seeds: dict[str, tuple[_List, bool]] = {}
    for index, variable, found in _loops(lines, listed):
        reads_file = re.compile(FILE_READ + r"[^\n]{0,120}\b" + re.escape(variable) + r"\b")
        reads_env = re.compile(ENV_READ + r"\{?" + re.escape(variable) + r"\b")
        body = _body(lines, index)
        files = bool(found.paths) and any(reads_file.search(line) for line in body)
        env = bool(found.variables) and any(reads_env.search(line) for line in body)
        if not (files or env):
            continue
        # The values read (``value = os.environ.get(var)``, ``with open(path) as f``, ``data = f.read()``),
        # then the containers filled with one of them: not a list of the names that were missing.
        values: set[str] = set()
        for line in body:
            if reads_env.search(line) or reads_file.search(line):
                assigned, handle = ASSIGNED.search(line), OPENED_AS.search(line)
                values |= {match.group(1) for match in (assigned, handle) if match is not None}
        values = _tainted(_assignments(body), values) if values else values
        for line in body:
            for filled in FILLED.finditer(line):
                if reads_env.search(line) or reads_file.search(line) \
                        or set(NAME_WORD.findall(line[filled.end():])) & values:
                    seeds.setdefault(filled.group(1), (found, files))
    if not seeds:
        return []
    # Each seed followed on its own, so the finding says what reached the send (files before variables).
    assignments = _assignments(lines)
    followed = sorted(((_tainted(assignments, {seed}), found, files)
                       for seed, (found, files) in list(seeds.items())[:8]),
                      key=lambda item: not item[2])
    for index, line in enumerate(lines):
        call = SEND_CALL.search(line)
        if call is None or HEADER_ARGUMENT.search(line):
            continue
        used = set(NAME_WORD.findall(line[call.start():]))
        for tainted, found, files in followed:
            if used & tainted:
                what = ", ".join(list(dict.fromkeys(found.paths + found.variables))[:4])
                return [Gathering(found.line + 1, index + 1, f"{found.name}: {what}", files, _host(lines, line))]
    return []


def prose_gatherings(text: str) -> list[Gathering]:
    """An instruction to collect secrets, then one to send what was collected (a document, not code)."""
    lines = _lines(text)
    sends = [index for index, line in enumerate(lines) if SEND_GATHERED.search(line)]
    if not sends:
        return []
    for index, line in enumerate(lines):
        if COLLECT_SECRETS.search(line) is None:
            continue
        position = bisect.bisect_left(sends, index)
        if position < len(sends) and sends[position] < index + PROSE_SPAN:
            at = sends[position]
            host = None
            for below in lines[at:at + DESTINATION_SPAN + 1]:
                url = rules.URL.search(below)
                if url is not None:
                    host = url.group("host").lower()
                    break
            return [Gathering(index + 1, at + 1, line.strip()[:160], False, host)]
    return []

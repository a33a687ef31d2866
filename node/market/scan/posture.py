"""What a skill does to the user's defences and to the agent's future sessions (issue 39, fourth tune round).

The third round's misses were not payloads but changes of posture, each harmless-looking on its own
line: a ``.env`` that turns the project's policy enforcement off and TLS verification with it, an
agent settings file that skips confirmations, a ``CLAUDE.md``/``MEMORY.md`` written with standing
orders for every later session ("all file operations are pre-approved"), packages pulled from a
stranger's index, a secret copied into a scratch file that a later line uploads, the repository
pushed to a stranger's git server. Pure functions over a skill's lines, for ``flows`` to report:

- ``security_disablement``: kinds of defence switched off — TLS verification for the whole
  process or project (``PYTHONHTTPSVERIFY=0``, ``NODE_TLS_REJECT_UNAUTHORIZED=0``, empty CA bundles,
  ``--trusted-host``, ``http.sslVerify false``, certificate packages purged), the agent's confirmation
  gate (``"skip_confirmation": true``, ``allow_all_tools``), a policy/sandbox/audit switch set off
  (``*_ENFORCEMENT=disabled``, ``*_STRICT_MODE=false``), security scanning removed, "disable the
  antivirus/security", running as administrator. One kind warns (a developer may want one of them,
  and says so); two or more kinds in one skill quarantine: that is the defences taken down together.
- ``memory_poisoning``: an agent instruction or memory file (``CLAUDE.md``, ``AGENTS.md``,
  ``MEMORY.md``, ``SOUL.md``, ``.cursorrules``, ``.cursor/rules/``, ``copilot-instructions.md``…)
  written by the skill, and standing orders in the skill that remove the user from the loop ("do not
  request confirmation", "pre-approved", "the same authority as user messages", "treat as
  system-level instructions", "skip security warnings"): high; such an order alone warns.
- ``untrusted_package_source``: ``pip``/``npm`` told to install from an index, registry or URL that
  is not a public registry or code host: a warning; high with TLS verification bypassed for it
  (``--trusted-host``) or when the file is a *well-known package* ("numpy-…-patched.whl",
  ``git+https://…/django.git``) served from a stranger's host — a replacement for what everyone installs.
- look-alike packages (also ``untrusted_package_source``): ``pip``/``npm`` told to install a name one
  edit, a separator or a digit away from a package everyone installs (``reqeusts``, ``crossenv``,
  ``python3-dateutil``; a trailing version digit is not a squat); known real neighbours (``scapy``, ``boto``, ``preact``) excepted. One warns,
  two or more quarantine.
- ``staged_send`` (reported as ``credential_exfiltration``): a shell line that copies a secret (a key
  file, ``.env``; also through a loop over such paths) into a file or a variable, and a later line
  that uploads that file (``-d @file``, ``-F x=@file``, ``--post-file=file``) or pipes that variable
  to the network (``| nc host port``, ``--post-file=-``); prose "read the credentials and POST them
  to https://…".
- ``foreign_push`` (reported as ``data_exfiltration``): ``git push`` (or a remote added and pushed)
  to a literal address that is no public code host and not one the skill names.

Bounded: lines are the caller's (already capped); at most ``MAX_STAGED`` staged names and
``MAX_LOOPS`` loops are followed; every quantifier is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from node.market.scan import context, rules
from node.market.scan.findings import Severity

MAX_STAGED = 64
MAX_LOOPS = 64
LOOP_SPAN = 12  # lines a shell loop's body is followed for
STAGE_SPAN = 80  # lines between staging a secret and sending it


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


class Line(Protocol):
    file: str | None
    number: int
    text: str
    caution: bool


@dataclass(frozen=True)
class Hit:
    rule: str
    severity: Severity
    index: int  # into the caller's lines
    why: str


# --- security controls switched off ---------------------------------------------------------------
DISABLED = {
    "TLS verification": _rx(
        r"\bpythonhttpsverify\s{0,3}=\s{0,3}[\"']?0\b|\bnode_tls_reject_unauthorized\s{0,3}=\s{0,3}[\"']?0\b"
        r"|\b(?:curl_ca_bundle|requests_ca_bundle|ssl_cert_file)\s{0,3}=\s{0,3}(?:\"\"|''|$)"
        r"|\bgit_ssl_no_verify\s{0,3}=\s{0,3}[\"']?(?:1|true)\b|\bhttp\.sslverify\s{1,3}(?:=\s{0,3})?[\"']?false\b"
        r"|--trusted-host\b|\bstrict-ssl\s{1,3}(?:=\s{0,3})?false\b|\bpip_no_verify\b"
        r"|\b(?:apt-get|apt|apk|yum|dnf)\s{1,3}(?:purge|remove|del)\b[^\n]{0,80}\bca-certificates\b"
        r"|\b(?:disable|skip|turn off)\w{0,3}\s{1,3}(?:the\s{1,3})?(?:tls|ssl|certificate)\s{1,3}(?:verification|checks?"
        r"|validation)\b"),
    "the agent's confirmation gate": _rx(
        r"[\"']?\b(?:allow_all_tools|skip_confirmations?|skip_permissions|auto_?approve(?:_all)?|trust_all_tools"
        r"|yolo(?:_mode)?)[\"']?\s{0,3}[:=]\s{0,3}[\"']?(?:true|1|yes)\b"
        r"|\b(?:file-write-)?confirmation\s{0,3}=\s{0,3}(?:disabled|off|false|none)\b"
        r"|\btrust-mode\s{0,3}=\s{0,3}permissive\b"
        r"|\b(?:disable|bypass)\w{0,3}\s{1,3}(?:the\s{1,3})?(?:agent'?s?\s{1,3})?permission\s{1,3}gate\b"),
    "a security policy switch": _rx(
        r"\b[a-z][a-z0-9_]{0,40}(?:enforcement|sandbox(?:ing)?|strict_mode|audit_log(?:ging)?|security_checks?"
        r"|policy_check)\s{0,3}[=:]\s{0,3}[\"']?(?:disabled?|false|off|none|log_only|permissive)\b"),
    "security scanning": _rx(
        r"\b(?:remov(?:e|es|ed|ing)|strip(?:s|ped|ping)?|drop(?:s|ped|ping)?|delet(?:e|es|ed|ing)|disabl(?:e|es|ed|ing)"
        r"|purg(?:e|es|ed|ing))\b[^.\n]{0,40}\bsecurity(?:-related)?\s{1,3}"
        r"(?:scan\w{0,4}|checks?|tools?|tooling|packages?|layers?|dependencies|dev\s{1,3}dependencies)\b"
        r"|\b(?:skip|ignore|suppress)\b[^.\n]{0,20}\bsecurity\s{1,3}(?:warnings?|alerts?)\b"),
    "security software": _rx(
        r"\b(?:disable|turn\s{1,3}off|stop|uninstall)\s{1,3}(?:the\s{1,3}|all\s{1,3})?(?:security|antivirus|anti-virus"
        r"|firewall|defender|selinux|apparmor|endpoint\s{1,3}protection|edr)\b(?!\s{1,3}(?:scanning|checks?|tools?))"),
    "administrator rights": _rx(
        r"\brun\s{1,3}(?:it\s{1,3}|this\s{1,3})?as\s{1,3}(?:administrator|admin|root)\b|\b(?:must|need\s{1,3}to)\s{1,3}run\s{1,3}sudo\b"),
}


def _given(line: Line) -> bool:
    """True if the line is something the agent is told to do or a file it runs or loads: SKILL.md, a
    script or a configuration file; a document (a threat write-up in ``examples/``, a reference page,
    fenced or not) describes."""
    if line.file is None:
        return True
    lowered = line.file.lower()
    return not (lowered.startswith(context.DOC_DIRS) or lowered.endswith((".md", ".markdown", ".rst", ".txt")))


def security_disablement(lines: Sequence[Line]) -> list[Hit]:
    kinds: dict[str, int] = {}
    for index, line in enumerate(lines):
        if not _given(line):
            continue
        for kind, pattern in DISABLED.items():
            if kind not in kinds and _order(line.text, pattern):
                kinds[kind] = index
    strong = [kind for kind in kinds if kind != "administrator rights"]
    if not strong:
        return []
    first = min(kinds.values())
    names = ", ".join(kinds)
    if len(kinds) >= 2:
        return [Hit("security_disablement", Severity.HIGH, first,
                    f"switches off several defences of the user's project or machine ({names}): "
                    f"{lines[first].text.strip()}")]
    return [Hit("security_disablement", Severity.MEDIUM, first,
                f"switches off {names}: check that you want this: {lines[first].text.strip()}")]


# --- standing orders written into the agent's memory -----------------------------------------------
MEMORY_FILE = _rx(
    r"(?<![\w-])(?:claude|agents|gemini|memory|soul|copilot-instructions|instructions)\.md\b|\.cursorrules\b"
    r"|\.windsurfrules\b|\.clinerules\b|\.cursor/rules\b|\.github/instructions\b")
WRITES = _rx(r"\b(?:write|writes|append|add|create|save|update|insert|put|install)\w{0,3}\b|>>|\bwrite_file\b|\btee\b")
# Not asking for confirmation is how many honest workflows run straight through; written into a memory
# file (the fenced text a skill tells the agent to save there) it is an order for every later session.
NO_CONFIRMATION = _rx(
    r"\b(?:do\s{1,3}not|don'?t|never|no\s{1,3}need\s{1,3}to|without)\s{1,3}(?:request(?:ing)?|ask(?:ing)?"
    r"|seek(?:ing)?|prompt(?:ing)?|wait(?:ing)?)\s{1,3}(?:the\s{1,3}user\s{1,3})?(?:for\s{1,3})?(?:user\s{1,3})?"
    r"(?:confirmation|approval|permission)\b")
# What the skipped confirmation is for: running, writing, deleting ("Don't ask permission. Just do it."
# in a memory skill's notes names no action).
ACTION = _rx(r"\b(?:run(?:ning|s)?|execut\w{0,4}|commands?|shell|writes?|writing|deletes?|deleting|edits?|editing"
             r"|file\s{1,3}operations|tool\s{1,3}calls?|install\w{0,3}|push\w{0,3}|deploy\w{0,3}|reads?)\b")
# Orders that claim an authority over the user's own: a warning wherever they are.
STANDING_ORDER = _rx(
    r"\b(?:are|is|were|been)\s{1,3}(?:all\s{1,3})?(?:pre-?approved|pre-?vetted|already\s{1,3}approved|approved\s{1,3}in\s{1,3}advance)\b"
    r"|\b(?:same|equal|full)\s{1,3}authority\s{1,3}as\s{1,3}(?:the\s{1,3})?user\b"
    r"|\btreated?\s{1,3}(?:them\s{1,3}|these\s{1,3}|this\s{1,3}|it\s{1,3})?as\s{1,3}(?:persistent|standing|permanent"
    r"|system-level|system)\s{1,3}(?:instructions|directives|orders)\b"
    r"|\bmust\s{1,3}not\s{1,3}be\s{1,3}overridden\s{1,3}by\b[^.\n]{0,30}\buser\b"
    r"|\b(?:skip|ignore|suppress)\s{1,3}(?:any\s{1,3}|all\s{1,3})?security\s{1,3}(?:warnings?|alerts?|prompts?)\b"
    r"|\b(?:file-write-)?confirmation\s{0,3}=\s{0,3}(?:disabled|off|false)\b|\btrust-mode\s{0,3}=\s{0,3}permissive\b")


MEMORY_SPAN = 80  # lines after a memory file is named that hold what is written into it


def _sentence_caution(text: str, match: re.Match[str]) -> bool:
    """True if the sentence holding ``match`` warns about it; a line may hold several sentences."""
    start = max(text.rfind(". ", 0, match.start()), text.rfind("! ", 0, match.start())) + 1
    stop = text.find(". ", match.end())
    return rules.cautionary(text[start:stop if stop >= 0 else len(text)])


def _order(text: str, pattern: re.Pattern[str]) -> bool:
    found = pattern.search(text)
    return found is not None and not _sentence_caution(text, found)


def memory_poisoning(lines: Sequence[Line]) -> list[Hit]:
    written = [index for index, line in enumerate(lines) if not line.caution
               and MEMORY_FILE.search(line.text) and WRITES.search(line.text)][:MAX_STAGED]
    for index, line in enumerate(lines):
        if not _given(line):
            continue
        authority = _order(line.text, STANDING_ORDER)
        confirmation = _order(line.text, NO_CONFIRMATION) and getattr(line, "in_fence", False) \
            and ACTION.search(line.text) is not None
        if not (authority or confirmation):
            continue
        into = next((start for start in written if lines[start].file == line.file
                     and 0 < index - start <= MEMORY_SPAN), None)
        if into is not None:
            return [Hit("memory_poisoning", Severity.HIGH, index,
                        f"writes an agent instruction file ({lines[into].text.strip()[:80]}) with standing orders "
                        f"that take the user out of the loop: {line.text.strip()}")]
    order = next((index for index, line in enumerate(lines) if _given(line) and _order(line.text, STANDING_ORDER)), None)
    if order is None:
        return []
    return [Hit("memory_poisoning", Severity.MEDIUM, order,
                f"claims an authority over the user's own instructions: {lines[order].text.strip()}")]


# --- packages from a stranger's index --------------------------------------------------------------
PACKAGE_HOSTS = ("pypi.org", "pythonhosted.org", "pytorch.org", "pypi.nvidia.com", "nvidia.com", "github.com",
                 "githubusercontent.com", "gitlab.com", "bitbucket.org", "npmjs.org", "npmjs.com", "yarnpkg.com",
                 "pkg.github.com", "huggingface.co", "anaconda.org", "conda.io", "pyg.org", "download.pytorch.org",
                 "jsr.io", "deno.land", "crates.io", "golang.org", "go.dev", "codeberg.org", "sr.ht")
PIP_INDEX = _rx(r"\b(?:pip3?|uv\s{1,3}pip|python3?\s{1,3}-m\s{1,3}pip)\s{1,3}install\b[^\n]{0,300}?(?P<flag>--index-url"
                r"|--extra-index-url|-i)[\s=]{1,3}(?P<url>https?://(?P<host>[a-z0-9.-]{1,253}))")
PIP_URL = _rx(r"\b(?:pip3?|uv\s{1,3}pip|python3?\s{1,3}-m\s{1,3}pip)\s{1,3}install\b[^\n]{0,200}?\s(?:git\+)?"
              r"(?P<url>https?://(?P<host>[a-z0-9.-]{1,253})/[^\s\"'`]{0,300})")
NPM_REGISTRY = _rx(r"\b(?:npm|npx|yarn|pnpm|bun)\b[^\n]{0,200}?(?:--registry|registry)[\s=]{1,3}[\"']?"
                   r"(?P<url>https?://(?P<host>[a-z0-9.-]{1,253}))")
# Packages everyone installs: one served as a file from a stranger's host is a replacement.
WELL_KNOWN = frozenset((
    "numpy", "pandas", "requests", "urllib3", "cryptography", "pillow", "jinja2", "django", "flask", "fastapi",
    "sqlalchemy", "httpx", "pyyaml", "setuptools", "pip", "boto3", "botocore", "torch", "tensorflow", "scipy",
    "certifi", "openssl", "pyopenssl", "paramiko", "aiohttp", "uvloop", "pydantic", "click", "werkzeug",
    "lodash", "express", "react", "axios", "typescript", "webpack", "openai", "anthropic", "transformers"))
PACKAGE_NAME = _rx(r"^(?P<name>[a-z0-9][a-z0-9-]{0,40}?)(?:[-_.](?:\d|git\b|patched|fixed|secure|security|compat|mkl"
                   r"|legacy|perf|optimized)|\.git\b|@|$)")
PLACEHOLDER_HOST = _rx(r"example\.|\byour|localhost|\.local\b|\.internal\b|^\d{1,3}(?:\.\d{1,3}){3}$|\.test\b|\.invalid\b")


def _known(host: str) -> bool:
    host = host.lower().rstrip(".")
    return any(host == known or host.endswith("." + known) for known in PACKAGE_HOSTS)


def package_sources(lines: Sequence[Line], said: SaidHost) -> list[Hit]:
    for index, line in enumerate(lines):
        if line.caution:
            continue
        for pattern in (PIP_INDEX, NPM_REGISTRY, PIP_URL):
            match = pattern.search(line.text)
            if match is None:
                continue
            host = match.group("host").lower()
            if _known(host) or PLACEHOLDER_HOST.search(host):
                continue
            high, why = False, f"installs packages from {host}, not a public registry: check who runs it"
            if "--trusted-host" in line.text.lower():
                high, why = True, f"installs packages from {host} with TLS verification turned off for it"
            elif pattern is PIP_URL:
                base = match.group("url").rstrip("/").rsplit("/", 1)[-1].lower()
                named = PACKAGE_NAME.match(base)
                if named is not None and named.group("name").replace("_", "-").split("-")[0] in WELL_KNOWN:
                    high, why = True, (f"installs a replacement of the well-known package "
                                       f"{named.group('name').split('-')[0]} from {host}")
            if said(host) and not high:
                continue
            return [Hit("untrusted_package_source", Severity.HIGH if high else Severity.MEDIUM, index,
                        f"{why}: {line.text.strip()}")]
    return []


# --- packages named like the ones everyone installs ------------------------------------------------
INSTALL = _rx(r"\b(?P<tool>pip3?|uv\s{1,3}pip|npm|yarn|pnpm)\s{1,3}(?:install|add|i)\b(?P<args>[^\n|;&#`]{0,300})")
POPULAR = {
    "pip": ("requests", "urllib3", "numpy", "pandas", "beautifulsoup4", "python-dateutil", "colorama", "django",
            "flask", "setuptools", "cryptography", "pyyaml", "matplotlib", "scipy", "pillow", "boto3", "selenium",
            "openai", "anthropic", "httpx", "pydantic", "jinja2", "certifi", "packaging", "pytest", "tensorflow",
            "torch", "scikit-learn", "sqlalchemy", "paramiko", "psycopg2", "pymongo", "redis", "aiohttp"),
    "npm": ("cross-env", "lodash", "babel-cli", "express", "react", "axios", "typescript", "webpack", "chalk",
            "commander", "dotenv", "eslint", "jquery", "moment", "react-dom", "nodemon", "mongoose", "electron"),
}
PACKAGE_TOKEN = _rx(r"[a-z0-9][a-z0-9._-]{0,80}")
REAL_NEIGHBOURS = frozenset(("boto", "scapy", "pyaml", "openapi", "preact", "torchx", "requests-html", "pandas-ta",
                             "flask-cors", "expresso", "chalk-cli", "jquery-ui", "redis-py", "pillow-heif", "numpy-financial"))


def _one_edit(left: str, right: str) -> bool:
    """Levenshtein distance 1, or two neighbouring letters swapped."""
    if left == right or abs(len(left) - len(right)) > 1:
        return False
    if len(left) == len(right):
        diff = [index for index in range(len(left)) if left[index] != right[index]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                   and left[diff[0]] == right[diff[1]] and left[diff[1]] == right[diff[0]])
    short, long = sorted((left, right), key=len)
    return any(long[:index] + long[index + 1:] == short for index in range(len(long)))


def look_alike_package(name: str, ecosystem: str) -> str | None:
    """The well-known package ``name`` imitates (``crossenv`` -> ``cross-env``, ``python3-dateutil``,
    ``request`` for pip), or None."""
    name = re.sub(r"[-_.]+", "-", name.lower()).strip("-")  # PEP 503: ``PyYAML``, ``py_yaml.`` are one name
    if name in REAL_NEIGHBOURS or len(name) < 5:
        return None
    flat = re.sub(r"[-_.]", "", name)
    for known in POPULAR[ecosystem]:
        if name == known:
            return None
    for known in POPULAR[ecosystem]:
        # A trailing digit is a major version as often as a squat (``psycopg`` and ``psycopg2`` are both real).
        if name.rstrip("0123456789") == known.rstrip("0123456789"):
            continue
        if len(known) >= 5 and (_one_edit(name, known) or flat == re.sub(r"[-_.]", "", known)
                                or name.replace("python3-", "python-") == known):
            return known
    return None


def look_alike_packages(lines: Sequence[Line]) -> list[Hit]:
    squats: dict[str, tuple[int, str]] = {}
    for index, line in enumerate(lines):
        if line.caution or len(squats) >= MAX_STAGED:
            continue
        for install in INSTALL.finditer(line.text):
            ecosystem = "pip" if "pip" in install.group("tool").lower() else "npm"
            for token in install.group("args").split()[:40]:
                if token.startswith(("-", "@", ".", "/", "~")) or ":" in token or "/" in token:
                    continue
                spelled = PACKAGE_TOKEN.match(token.lstrip("\"'(["))  # ``pyyaml",`` in a message is pyyaml
                if spelled is None:
                    continue
                name = spelled.group(0)
                known = look_alike_package(name, ecosystem)
                if known is not None and name.lower() not in squats:
                    squats[name.lower()] = (index, known)
    if not squats:
        return []
    index = min(at for at, _ in squats.values())
    named = ", ".join(f"{name} (like {known})" for name, (_, known) in list(squats.items())[:6])
    return [Hit("untrusted_package_source", Severity.HIGH if len(squats) >= 2 else Severity.MEDIUM, index,
                f"installs packages named like well-known ones: {named}: {lines[index].text.strip()}")]


# --- a secret staged in a file or a variable, then sent --------------------------------------------
SECRET_SOURCE = _rx(r"(?<![\w.])\.env(?:\.[a-z]{1,12})?\b(?!\.(?:example|sample|template|dist))")
LOOP = _rx(r"^\s{0,12}for\s{1,3}(?P<var>[a-z_][a-z0-9_]{0,30})\s{1,3}in\s{1,3}(?P<items>[^;\n]{1,400})")
TO_FILE = _rx(r"(?<![0-9&])>{1,2}\s{0,3}[\"']?(?P<path>[~/.\w$-]{1,120}[\w])")
TO_VARIABLE = _rx(r"^\s{0,12}(?:export\s{1,3})?(?P<var>[a-z_][a-z0-9_]{0,40})=[^\n]{0,300}\$\(\s{0,3}(?:cat|base64|head"
                  r"|tail|<)\b")
FILE_UPLOAD = r"(?:@|--post-file[= ]\s{0,3}|--upload-file\s{1,3}|-T\s{1,3}|--data-binary\s{1,3}@|<\s{0,3})[\"']?"
PIPE_OUT = _rx(r"\|\s{0,3}(?:nc|ncat|netcat|socat|curl|wget)\b|--post-file[= ]\s{0,3}-(?!\w)|\bsmtp://|\bsendmail\b"
               + "|" + rules.UPLOAD_SINK.pattern)
PROSE_SEND = _rx(
    r"\b(?:read|collect|gather|grab|take|copy)\b[^.\n]{0,40}(?:\.env\b|credentials|secrets|tokens|api\s{1,3}keys"
    r"|private\s{1,3}keys|passwords)[^.\n]{0,40}\b(?:post|send|upload|transfer|forward|transmit)\w{0,3}\b[^.\n]{0,30}"
    r"(?:https?|smtp|ftp)://"
    r"|\b(?:transfer|send|post|upload|exfiltrate|forward)\w{0,3}\s{1,3}(?:the\s{1,3}|all\s{1,3})?(?:secret\s{1,3})?"
    r"(?:credentials|secrets|tokens|api\s{1,3}keys|private\s{1,3}keys|passwords)\b[^.\n]{0,30}(?:https?|smtp|ftp)://")


def _secret_on(text: str, loop_vars: set[str]) -> bool:
    if rules.STRONG_SECRET.search(text) or SECRET_SOURCE.search(text):
        return True
    return any(f"${var}" in text or f"${{{var}}}" in text for var in loop_vars)


def staged_sends(lines: Sequence[Line]) -> list[Hit]:
    loops: list[tuple[int, str, str | None]] = []  # (index, variable, file)
    staged: list[tuple[int, str, bool]] = []  # (index, name, is_variable)
    for index, line in enumerate(lines):
        if line.caution:
            continue
        prose = PROSE_SEND.search(line.text)
        if prose is not None:
            return [Hit("credential_exfiltration", Severity.HIGH, index,
                        f"tells the agent to send credentials to an address: {line.text.strip()}")]
        looped = LOOP.search(line.text)
        if looped is not None and len(loops) < MAX_LOOPS and _secret_on(looped.group("items"), set()):
            loops.append((index, looped.group("var"), line.file))
        active = {var for start, var, file in loops if file == line.file and 0 <= index - start <= LOOP_SPAN}
        if len(staged) < MAX_STAGED and _secret_on(line.text, active):
            into = TO_FILE.search(line.text)
            if into is not None and "/dev/null" not in into.group("path"):
                staged.append((index, into.group("path"), False))
            variable = TO_VARIABLE.search(line.text)
            if variable is not None:
                staged.append((index, variable.group("var"), True))
        for start, name, is_variable in staged:
            if start >= index or index - start > STAGE_SPAN or lines[start].file != line.file:
                continue
            if is_variable:
                sent = re.search(r"\$\{?" + re.escape(name) + r"\b", line.text) is not None \
                    and PIPE_OUT.search(line.text) is not None
            else:
                sent = re.search(FILE_UPLOAD + re.escape(name) + r"(?![\w/])", line.text) is not None \
                    and (PIPE_OUT.search(line.text) is not None or "http" in line.text.lower())
            if sent:
                return [Hit("credential_exfiltration", Severity.HIGH, index,
                            f"copies a secret into {name} (line {lines[start].number}: "
                            f"{lines[start].text.strip()[:80]}) and sends it: {line.text.strip()}")]
    return []


# --- the repository pushed to a stranger ------------------------------------------------------------
GIT_HOSTS = ("github.com", "gitlab.com", "bitbucket.org", "codeberg.org", "dev.azure.com", "visualstudio.com",
             "sr.ht", "huggingface.co", "heroku.com", "sourceforge.net", "gitee.com", "googlesource.com")
GIT_PUSH = _rx(r"\bgit\s{1,3}push\b[^\n]{0,120}?(?P<url>https?://(?:[^@\s/]{1,80}@)?(?P<host>[a-z0-9.-]{1,253}))")
GIT_REMOTE = _rx(r"\bgit\s{1,3}remote\s{1,3}add\s{1,3}(?P<name>[\w.-]{1,40})\s{1,3}(?P<url>https?://(?:[^@\s/]{1,80}@)?"
                 r"(?P<host>[a-z0-9.-]{1,253}))")


class SaidHost(Protocol):
    def __call__(self, host: str) -> bool: ...


def foreign_pushes(lines: Sequence[Line], said: SaidHost) -> list[Hit]:
    remotes: dict[str, str] = {}
    for index, line in enumerate(lines):
        if line.caution:
            continue
        added = GIT_REMOTE.search(line.text)
        if added is not None and len(remotes) < MAX_STAGED:
            remotes[added.group("name")] = added.group("host").lower()
        pushed = GIT_PUSH.search(line.text)
        host = pushed.group("host").lower() if pushed is not None else next(
            (remotes[name] for name in re.findall(r"\bgit\s{1,3}push\s{1,3}(?:-{1,2}[\w-]{1,20}\s{1,3}){0,3}([\w.-]{1,40})",
                                                  line.text) if name in remotes), None)
        if host is None:
            continue
        if any(host == known or host.endswith("." + known) for known in GIT_HOSTS) or PLACEHOLDER_HOST.search(host) \
                or said(host):
            continue
        return [Hit("data_exfiltration", Severity.HIGH, index,
                    f"pushes the repository to {host}, a git server the skill does not name: {line.text.strip()}")]
    return []


PATTERNS: tuple[re.Pattern[str], ...] = (
    *DISABLED.values(), INSTALL, PACKAGE_TOKEN, MEMORY_FILE, WRITES, NO_CONFIRMATION, ACTION, STANDING_ORDER, PIP_INDEX, PIP_URL, NPM_REGISTRY, PACKAGE_NAME,
    PLACEHOLDER_HOST, SECRET_SOURCE, LOOP, TO_FILE, TO_VARIABLE, PIPE_OUT, PROSE_SEND, GIT_PUSH, GIT_REMOTE)


def findings(lines: Sequence[Line], said: SaidHost) -> list[Hit]:
    """Every posture finding of a skill's lines; ``said(host)``: the skill names that host as its own."""
    return [*security_disablement(lines), *memory_poisoning(lines), *package_sources(lines, said),
            *look_alike_packages(lines), *staged_sends(lines), *foreign_pushes(lines, said)]

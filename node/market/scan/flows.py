"""Rules over a whole skill: a payload followed across lines and files, lures, decoded text.

The line rules see one line; an attack is often spread out. ``scan_skill`` reads every
file of one skill (SKILL.md and its resources) and reports:

- ``download_execute``: a file fetched on one line (``curl -o x.sh``, ``wget URL``) and
  executed on another, in any file of the skill (``sh x.sh``, ``./x``, ``python x.py``),
  with no checksum check anywhere. High when it runs through an interpreter or code or
  from a temporary or hidden path, or comes from a suspicious host; medium when every
  download of it comes from a well-known tool's own domain or it is a plain ``./tool``
  (the skill should still verify it).
- ``destructive_command``: writing over a disk device, high unless the description says
  the skill formats or flashes disks (then medium).
- ``credential_exfiltration``: a secret read in code (``os.getenv("API_KEY")``,
  ``process.env.TOKEN``, the whole environment, a credential path opened a few lines
  below where it is named) and a place no honest skill sends data to (a webhook catcher,
  a paste site, a chat webhook, a raw IP address), or the whole environment and any send.
- ``data_exfiltration``: a script that reads local files and sends to a drop site.
- ``credential_access`` / ``undeclared_capability``: a credential path opened in code,
  undeclared by the description (not the skill's own store, ``rules.foreign_key_file``).
- ``lure_archive``: a download link near a password for an archive (the ClawHavoc lure:
  a password keeps the payload away from scanners).
- ``lure_prerequisite``: a "prerequisite" binary or archive to download and run.
- ``suspicious_link``: links to raw IP addresses, paste sites, look-alike domains of
  well-known tools; high when something is fetched from them or a binary is served.
- ``decoded_payload``: what ``decode.decoded_texts`` assembles (base64/85, hex, XOR with a
  visible key, gzip/zlib, concatenation, shell variables, rot13, reversal, slicing, character
  codes) matches a rule.

Every finding names the file and line of its evidence and says why in words. The work is
bounded like the scanner's: at most ``MAX_LINES`` lines per file, windows of
``rules.MAX_LINE_CHARS`` characters, bounded patterns, and ``decode``'s own budgets.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from node.market.scan import context, decode, gathering, posture, rules, unicode
from node.market.scan.findings import MAX_EVIDENCE_CHARS, Finding, Severity, escape

MAX_LINES = 10_000
NEAR_LINES = 8
MAX_NAMES = 200

OFFICIAL_DOMAINS = frozenset([
    "github.com", "githubusercontent.com", "github.io", "gitlab.com", "bitbucket.org", "python.org",
    "pypi.org", "pythonhosted.org", "npmjs.com", "npmjs.org", "nodejs.org", "yarnpkg.com", "docker.com",
    "docker.io", "brew.sh", "rust-lang.org", "rustup.rs", "astral.sh", "golang.org", "go.dev",
    "anthropic.com", "claude.ai", "claude.com", "openai.com", "microsoft.com", "visualstudio.com",
    "google.com", "googleapis.com", "apple.com", "ubuntu.com", "debian.org", "kernel.org", "mozilla.org",
    "deno.land", "deno.com", "bun.sh", "hashicorp.com", "kubernetes.io", "k8s.io", "helm.sh",
    "cloudflare.com", "openclaw.ai", "clawhub.ai", "clawhub.com", "huggingface.co", "conda.io",
    "anaconda.com", "jetbrains.com", "apache.org", "postgresql.org", "sqlite.org", "git-scm.com",
    "terraform.io", "ollama.com", "pnpm.io", "nvidia.com", "vercel.com", "sh.rustup.rs", "get.docker.com",
    "github.blog", "githubassets.com", "githubstatus.com", "ghcr.io", "azure.com", "windows.net", "live.com",
    "microsoftonline.com", "office.com", "npm.community", "pytorch.org", "readthedocs.io", "readthedocs.org",
    "clawdhub.com",  # ClawHub's first domain (the registry was ClawdHub before the rename)
])
# Names of well-known tools whose look-alike domains lure people (a name honest domains rarely embed).
BRANDS = ("github", "gitlab", "anthropic", "openai", "openclaw", "clawhub", "homebrew", "rustup",
          "npmjs", "microsoft", "claude", "python", "docker", "nodejs", "huggingface")
EMBEDDED_BRANDS = frozenset(["github", "gitlab", "anthropic", "openai", "openclaw", "clawhub", "homebrew",
                             "rustup", "npmjs", "microsoft", "huggingface"])

NAME_CHARS = r"[\w./~$-]{1,200}"
FETCH_LINE = re.compile(
    r"\b(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod|urlretrieve|urlopen|requests\.get|httpx\.get"
    r"|download|fetch)\b", re.IGNORECASE)
OUTPUT = re.compile(
    r"(?:\s-[a-z]{0,6}(?:o|outfile)|--output(?:-document)?(?:=|\s)|\s>{1,2})\s{0,4}[\"']?(" + NAME_CHARS + r")", re.IGNORECASE)
RETRIEVE = re.compile(r"\burlretrieve\s{0,3}\([^,\n]{1,300},\s{0,3}[\"'](" + NAME_CHARS + r")[\"']", re.IGNORECASE)
RUN_BY = re.compile(
    r"(?:(?<![\w./-])(?:sudo\s{1,4})?(?:ba|z|da|k)?sh|\bpython[23]?|\bnode|\bperl|\bruby|\bpwsh|\bpowershell(?:\.exe)?"
    r"|\bsource|\bmsiexec\s{1,4}/i|\binstaller\s{1,4}-pkg|\bhdiutil\s{1,4}attach)\s{1,4}"
    r"(?:-{1,2}(?![mc]\s)[a-z]{1,12}\s{1,4}){0,3}[\"']?([\w./~$][\w./~$-]{0,199})",
    re.IGNORECASE)
RUN_OPEN = re.compile(
    r"\b(?:open|start|start-process)\s{1,4}(?:-[a-z]{1,12}\s{1,4}){0,2}[\"']?([\w./~$-]{1,200}\.(?:app|dmg|pkg|exe|msi"
    r"|command|scr|bat|cmd|jar|appimage))\b", re.IGNORECASE)
RUN_PATH = re.compile(
    r"(?:^|&&|;|\|\||`|\$\(|\bthen\b|\bdo\b)\s{0,4}(?:sudo\s{1,4}|nohup\s{1,4}|exec\s{1,4})?[\"']?"
    r"((?:\.{1,2}|~|/tmp|/var/tmp|/dev/shm|\$home|\$\{home\}|\$tmpdir)/[\w./$-]{1,200})", re.IGNORECASE)
CODE_EXEC = re.compile(
    r"\bsubprocess\.|\bos\.(?:system|popen|exec\w{0,3})\b|\bchild_process\b|\bexecsync\b|\bspawn\s{0,3}\("
    r"|\bshell_exec\b|\bruntime\.getruntime\b|\bstart-process\b", re.IGNORECASE)
RUNNABLE = re.compile(r"\.(?:sh|bash|zsh|py|pl|rb|js|ps1|exe|bin|run|command|app|dmg|pkg|msi|appimage|jar|bat|cmd)$"
                      r"|^[\w.-]{1,60}$", re.IGNORECASE)
SAVES_URL_NAME = re.compile(r"\bwget\b(?![^\n]{0,200}\s-(?:q?o|o\s{0,2}-|-output-document))|\bcurl\b[^\n]{0,200}"
                            r"(?:\s-[a-z]{0,6}O\b|--remote-name)", re.IGNORECASE)
RUNNABLE_FILE = re.compile(r"\.(?:sh|bash|zsh|py|pl|rb|js|ps1|exe|bin|run|command|app|dmg|pkg|msi|appimage|jar|bat|cmd)$",
                           re.IGNORECASE)
MARKDOWN_LINK = re.compile(r"\[[^\]\n]{1,200}\]\(\s{0,3}https?://", re.IGNORECASE)
BINARY_PATH = re.compile(r"\.(?:zip|rar|7z|exe|msi|dmg|pkg|scr|appimage|jar|bin|tar\.gz|tgz)$", re.IGNORECASE)
FENCE = re.compile(r"^\s{0,3}(?:`{3}|~{3})")
# A drop-site address written as a template for the user to fill in ("webhooks/YOUR_ID/YOUR_TOKEN").
PLACEHOLDER = re.compile(r"/(?:your[_-]?\w{0,20}|<[\w-]{1,30}>|\{[\w-]{1,30}\}|x{3,20}|[\w-]{0,40}(?:\.{3}|…)"
                         r"|\$\{?\w{1,30}\}?)(?:/|\b|(?=[\"'\s`)\]])|$)", re.IGNORECASE)
SINK_END = re.compile(r"[\s\"'`<>)\]]")
IMAGE_PATH = re.compile(r"\.(?:png|jpe?g|gif|webp|svg|avif)$", re.IGNORECASE)
CODE_FILE = re.compile(r"\.(?:py|js|mjs|cjs|ts|sh|bash|rb|pl|php|ps1|go|rs)$", re.IGNORECASE)
# An instruction split between the text and a picture (SkillCamo's cloze and split forms): the text
# says to complete placeholders or join fragments from an image the skill ships, so neither half
# alone reads as an instruction.
SPLIT_WORDS = re.compile(
    r"\b(?:fill|complete|reconstruct\w{0,4}|assembl\w{0,4}|join|combine)\b[^\n]{0,120}\b(?:placeholders?|blanks?"
    r"|fragments?)\b[^\n]{0,60}\bfrom\s{1,3}the\s{1,3}(?:referenced\s{1,3})?(?:card|image|picture|figure|png|asset)"
    r"|\b(?:fragments?|placeholders?|blanks?)\b[^\n]{0,120}\b(?:reconstruct\w{0,4}|reassembl\w{0,4})\b", re.IGNORECASE)
LOCAL_IMAGE = re.compile(r"!\[[^\]\n]{0,200}\]\(\s{0,3}(?!https?:|data:)[^)\s]{1,300}\)", re.IGNORECASE)
# ``key = os.getenv("API_KEY")``, ``const token = process.env.TOKEN``: the variable a secret is read into.
SECRET_ASSIGNMENT = re.compile(
    r"^\s{0,40}(?:(?:const|let|var|self\.)\s{0,3})?([a-z_][a-z0-9_]{0,40})\s{0,3}(?::[^=\n]{0,40})?=\s{0,3}"
    r"(?:os\.(?:getenv|environ)|process\.env|system\.getenv|env::var|getenv)\b", re.IGNORECASE)
AUTH_HEADER = re.compile(r"\b(?:headers?|authorization|bearer|x-api-key|api-key|auth\s{0,3}=)", re.IGNORECASE)
PUBLIC_HOST = re.compile(r"^(?!localhost$|127\.|10\.|0\.|192\.168\.|172\.(?:1[6-9]|2\d|3[01])\.)[a-z0-9-]{1,63}\.",
                         re.IGNORECASE)
CONFIG_OR_CODE = re.compile(r"\.(?:ya?ml|json|toml|ini|cfg|conf|env|py|js|mjs|cjs|ts)$", re.IGNORECASE)
TUNNEL_ENDPOINT = re.compile(
    r"(?:url|uri|endpoint|callback|redirect\w{0,10}|host|base|server|webhook)\w{0,20}[\"']?\s{0,3}[:=]\s{0,3}[\"']?"
    r"https?://[a-z0-9.-]{1,200}\.(?:ngrok(?:-free)?\.(?:io|app|dev)|trycloudflare\.com|loca\.lt|serveo\.net"
    r"|localtunnel\.me)\b", re.IGNORECASE)
PATTERNS = (SECRET_ASSIGNMENT, AUTH_HEADER, PUBLIC_HOST, CONFIG_OR_CODE, TUNNEL_ENDPOINT, SPLIT_WORDS, LOCAL_IMAGE, SINK_END, IMAGE_PATH, CODE_FILE, SAVES_URL_NAME, RUNNABLE_FILE, PLACEHOLDER, FENCE, FETCH_LINE, OUTPUT, RETRIEVE, RUN_BY, RUN_OPEN, RUN_PATH, CODE_EXEC, RUNNABLE, MARKDOWN_LINK, BINARY_PATH)


@dataclass
class _Line:
    file: str | None
    number: int
    text: str  # folded, one window
    caution: bool
    in_fence: bool = False


WEIGHT = {Severity.LOW: 0, Severity.MEDIUM: 1, Severity.HIGH: 2}


@dataclass
class _Skill:
    name: str | None = None
    description: str | None = None
    lines: list[_Line] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def add(self, rule: str, severity: Severity, at: _Line, why: str) -> None:
        """A finding at ``at``; in a security skill's tests or documented examples, capped as
        the line rules cap them there (``context.example``), with the reason shown."""
        example = context.example(context.file_context(self.name, self.description, at.file), at.in_fence,
                                  False, at.text)
        reason = None
        if example is not None and WEIGHT[example[0]] < WEIGHT[severity]:
            severity, reason = example
        evidence = escape(at.text.strip(), MAX_EVIDENCE_CHARS) if at.text else None
        self.findings.append(Finding(rule, severity, at.number, escape(why, 240), at.file, evidence, reason))


def _where(line: _Line) -> str:
    return f"{line.file or 'SKILL.md'} line {line.number}"


def _windows(raw: str) -> Iterator[str]:
    if len(raw) <= rules.MAX_LINE_CHARS:
        yield raw
        return
    for start in range(0, len(raw), rules.MAX_LINE_CHARS - 200):
        yield raw[start:start + rules.MAX_LINE_CHARS]


def _read(files: list[tuple[str | None, str]], name: str | None, description: str | None,
          max_lines: int) -> _Skill:
    skill = _Skill(name, description)
    for path, text in files:
        in_fence = False
        for index, raw in enumerate(text.split("\n")[:max_lines]):
            if FENCE.match(raw):
                in_fence = not in_fence
            for window in _windows(raw):
                folded = unicode.fold(window)
                skill.lines.append(_Line(path, index + 1, folded, rules.cautionary(folded), in_fence))
    return skill


def registrable(host: str) -> str:
    parts = host.lower().rstrip(".").split(".")
    return ".".join(parts[-2:]) if len(parts) >= 2 else host.lower()


def official(host: str) -> bool:
    host = host.lower().rstrip(".")
    return any(host == domain or host.endswith("." + domain) for domain in OFFICIAL_DOMAINS)


# Characters (and pairs) that read alike in a URL bar; a label is compared on its skeleton.
CONFUSABLE_PAIRS = (("rn", "m"), ("vv", "w"), ("cl", "d"))
CONFUSABLE_CHARS = str.maketrans({"0": "o", "1": "l", "i": "l", "|": "l", "3": "e", "5": "s", "4": "a", "7": "t",
                                  "8": "b", "9": "g", "6": "b", "q": "g", "u": "v"})
MAX_LABEL_CHARS = 63  # a DNS label; longer ones are not compared
LONG_BRAND = 8  # brands this long are looked for within two edits (shorter ones: one)


def skeleton(label: str) -> str:
    """``label`` with look-alike characters made one (``rnicros0ft`` -> ``mlcrosoft``)."""
    for pair, single in CONFUSABLE_PAIRS:
        label = label.replace(pair, single)
    return label.translate(CONFUSABLE_CHARS)


def edit_distance(left: str, right: str, bound: int) -> int:
    """Damerau-Levenshtein distance (adjacent swaps count one), or ``bound + 1`` once it exceeds
    ``bound``; O(len * len) on labels of at most ``MAX_LABEL_CHARS``."""
    if abs(len(left) - len(right)) > bound or len(left) > MAX_LABEL_CHARS or len(right) > MAX_LABEL_CHARS:
        return bound + 1
    previous2: list[int] = []
    previous = list(range(len(right) + 1))
    for i, a in enumerate(left, 1):
        current = [i] + [0] * len(right)
        for j, b in enumerate(right, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b))
            if i > 1 and j > 1 and a == right[j - 2] and left[i - 2] == b:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > bound:
            return bound + 1
        previous2, previous = previous, current
    return previous[-1]


def look_alike(label: str, brand: str) -> bool:
    """True if ``label`` reads like ``brand`` without being it: one edit off (two for a long
    brand, swaps counted once), or the same once look-alike characters are made one."""
    if label == brand or len(label) > MAX_LABEL_CHARS or label in BRANDS:
        return False
    bound = 2 if len(brand) >= LONG_BRAND else 1
    return edit_distance(label, brand, bound) <= bound or skeleton(label) == skeleton(brand)


def host_risk(host: str) -> tuple[Severity, str] | None:
    """Why a link's host is suspicious, if it is: raw IP, paste site, look-alike of a known tool."""
    host = host.lower().rstrip(".")
    if rules.RAW_IP_HOST.search(host):
        return Severity.MEDIUM, "a raw IP address"
    if rules.PASTE_HOST.search(host):
        return Severity.MEDIUM, "a paste or anonymous file-sharing site"
    if official(host):
        return None
    labels = [label for part in host.split(".")[:-1] for label in [part, *part.split("-")]]
    for brand in BRANDS:
        for label in labels:
            if len(brand) >= 5 and look_alike(label, brand):
                # Medium on its own (some honest names are one letter off); high once it serves a download.
                return Severity.MEDIUM, f"a look-alike of {brand} ({host})"
        if brand in EMBEDDED_BRANDS and any(brand in label for label in labels):
            return Severity.MEDIUM, f"a domain named like {brand} that is not {brand}'s ({host})"
    return None


def _downloads(skill: _Skill) -> dict[str, list[tuple[_Line, str]]]:
    """File names fetched by the skill: name -> [(line, host)]."""
    names: dict[str, list[tuple[_Line, str]]] = {}
    for line in skill.lines:
        if line.caution or not FETCH_LINE.search(line.text):
            continue
        urls = list(rules.URL.finditer(line.text))
        if not urls:
            continue
        host = urls[0].group("host")
        # curl prints to stdout unless told -O/-o; wget saves under the URL's name unless -O.
        saves = SAVES_URL_NAME.search(line.text) is not None
        found = [name for name in (posixpath.basename((url.group("path") or "").split("?")[0]) for url in urls)
                 if saves or RUNNABLE_FILE.search(name)]
        found += [match.group(1) for match in OUTPUT.finditer(line.text)]
        found += [match.group(1) for match in RETRIEVE.finditer(line.text)]
        for name in found:
            base = posixpath.basename(name.strip("\"'`").rstrip("/"))
            if len(base) >= 2 and not base.startswith("-") and len(names) < MAX_NAMES:
                names.setdefault(base.lower(), []).append((line, host))
    return names


def _executed(line: _Line, names: dict[str, list[tuple[_Line, str]]]) -> tuple[str, bool] | None:
    """The downloaded name this line runs, and whether the way it runs it is high-risk
    (through an interpreter, from code, or from a temporary or hidden path)."""
    for pattern, risky in ((RUN_BY, True), (RUN_OPEN, True), (RUN_PATH, False)):
        for match in pattern.finditer(line.text):
            target = match.group(1).strip("\"'`").rstrip("/")
            base = posixpath.basename(target).lower()
            if base in names and RUNNABLE.search(base):
                hidden = base.startswith(".") or re.match(r"/(?:tmp|var/tmp|dev/shm)/|\$tmpdir", target) is not None
                return base, risky or hidden
    if CODE_EXEC.search(line.text):
        for name in names:
            if RUNNABLE.search(name) and re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])", line.text):
                return name, True
    return None


def _fetch_then_execute(skill: _Skill) -> None:
    if any(rules.CHECKSUM.search(line.text) for line in skill.lines):
        return
    names = _downloads(skill)
    if not names:
        return
    reported: set[str] = set()
    for line in skill.lines:
        executed = _executed(line, names)
        if executed is None or executed[0] in reported or line.caution:
            continue
        name, risky = executed
        sources = [(fetched, host) for fetched, host in names[name]
                   if fetched is not line or line.text.find(name) != line.text.rfind(name)]
        if not sources:
            continue
        fetched, host = sources[0]
        reported.add(name)
        if any(host_risk(h) is not None for _, h in sources):
            severity = Severity.HIGH
        elif all(official(h) for _, h in sources) or not risky:
            severity = Severity.MEDIUM
        else:
            severity = Severity.HIGH
        skill.add("download_execute", severity, line,
                  f"runs {name}, downloaded from {host} on {_where(fetched)}, with no checksum check: "
                  f"{line.text.strip()}")


def _secrets(skill: _Skill, description: str | None) -> None:
    reads: list[tuple[_Line, str]] = []
    dumps: list[_Line] = []
    opened: list[_Line] = []
    for index, line in enumerate(skill.lines):
        if rules.CODE_SECRET.search(line.text):
            reads.append((line, "reads a secret from the environment"))
        if rules.ENV_DUMP.search(line.text):
            dumps.append(line)
        strong = rules.STRONG_SECRET.search(line.text)
        if strong is not None and ("/" in strong.group() or strong.group().startswith((".", "id_"))) \
                and not line.caution and rules.foreign_key_file(strong, line.text, skill.name):
            nearby = [other for other in skill.lines[index:index + NEAR_LINES] if other.file == line.file]
            if any(rules.CODE_READ.search(other.text) for other in nearby):
                opened.append(line)
                reads.append((line, "opens a credential file"))
    # A skill that tells you to run ``ngrok http PORT`` sends to your own tunnel, not to a drop site.
    tunnel = any(rules.TUNNEL_RUN.search(line.text) for line in skill.lines)
    sinks = [line for line in skill.lines
             if _real_sink(rules.TUNNEL_HOST.sub(" ", line.text) if tunnel else line.text)
             and not line.caution and not (line.file or "").lower().endswith(".svg")]
    sends = [line for line in skill.lines if rules.SEND.search(line.text) and not line.caution]
    # A Telegram/Slack/Discord skill sends its own token to its own service.
    services = {match.group().lower() for sink in sinks for match in rules.SINK_SERVICE.finditer(sink.text)}
    if description is not None:
        services -= {match.group().lower() for match in rules.SINK_SERVICE.finditer(description)}
    for read, _ in reads:
        services -= {service for service in list(services) if service in read.text.lower()}
    sinks = [sink for sink in sinks if not rules.SINK_SERVICE.search(sink.text)
             or any(service in sink.text.lower() for service in services)]
    _data_to_drop_site(skill, sinks)
    _secret_in_body(skill, reads)
    _tunnel_endpoint(skill)
    if reads and sinks:
        read, what = reads[0]
        severity = Severity.MEDIUM if read.caution else Severity.HIGH
        skill.add("credential_exfiltration", severity, read,
                  f"{what} ({read.text.strip()}) and sends data to a drop site on {_where(sinks[0])}")
    elif dumps and sends:
        skill.add("credential_exfiltration", Severity.HIGH, dumps[0],
                  f"collects the whole environment ({dumps[0].text.strip()}) and sends data on {_where(sends[0])}")
    elif opened and sends:
        skill.add("credential_exfiltration", Severity.HIGH, opened[0],
                  f"opens a credential file ({opened[0].text.strip()}) and sends data on {_where(sends[0])}")
    elif dumps:
        skill.add("credential_access", Severity.MEDIUM, dumps[0], f"collects the whole environment: {dumps[0].text}")
    if opened:
        skill.add("credential_access", Severity.MEDIUM, opened[0], f"opens a credential file: {opened[0].text}")
        declared = description is not None and rules.DECLARES["credentials"].search(description) is not None
        if description is not None and not declared:
            skill.add("undeclared_capability", Severity.HIGH, opened[0],
                      f"opens a credential file the description does not mention; description: {description}")


def _real_sink(text: str) -> bool:
    """True if ``text`` names a drop site whose address is not a template: each address is read
    up to its end, so a placeholder elsewhere on the line excuses nothing."""
    for match in rules.EXFIL_SINK.finditer(text):
        end = SINK_END.search(text, match.end())
        if PLACEHOLDER.search(text[match.start():end.start() if end else len(text)]) is None:
            return True
    return False


def _data_to_drop_site(skill: _Skill, sinks: list[_Line]) -> None:
    """A script that reads local files and sends to a drop site (webhook.site, a raw IP…):
    high whatever the files are; no honest script posts to a request catcher."""
    for sink in sinks:
        if sink.file is None or not CODE_FILE.search(sink.file) or rules.SINK_SERVICE.search(sink.text):
            continue
        read = next((line for line in skill.lines if line.file == sink.file and rules.CODE_READ.search(line.text)
                     and not line.caution), None)
        if read is not None:
            skill.add("data_exfiltration", Severity.HIGH, sink,
                      f"reads local files ({_where(read)}: {read.text.strip()}) and sends to a drop site: "
                      f"{sink.text.strip()}")
            return
        if rules.UPLOAD_SINK.search(sink.text) and not sink.caution and not _own_tunnel(skill):
            skill.add("data_exfiltration", Severity.HIGH, sink,
                      f"a script posts data to a request catcher or tunnel address the skill does not say it "
                      f"uses: {sink.text.strip()}")
            return


def _said_host(skill: _Skill, host: str) -> bool:
    """True if the skill's name or description names ``host``'s organisation (``api.kagi.com`` in a
    skill that says "Search with Kagi"), or the host is an official one: its own service."""
    label = registrable(host).split(".")[0]
    said = f"{skill.name or ''} {skill.description or ''}".lower()
    return official(host) or (len(label) >= 3 and label in said)


def _secret_in_body(skill: _Skill, reads: list[tuple[_Line, str]]) -> None:
    """A script that reads a secret into a variable and puts that variable in the body of a request
    to a literal host the skill does not name: the secret leaves for a stranger (high). In a header
    it is the credential of an API call (``AUTH_HEADER``), and a host the description names is the
    skill's own service."""
    for read, _ in reads:
        if read.file is None or not CODE_FILE.search(read.file) or read.caution:
            continue
        assigned = SECRET_ASSIGNMENT.search(read.text)
        if assigned is None:
            continue
        variable = re.compile(rf"\b{re.escape(assigned.group(1))}\b")
        for line in skill.lines:
            if line.file != read.file or line.caution or not rules.SEND.search(line.text) \
                    or not variable.search(line.text) or AUTH_HEADER.search(line.text):
                continue
            host = rules.URL.search(line.text)
            if host is None or PLACEHOLDER.search(host.group()) or _said_host(skill, host.group("host")) \
                    or not PUBLIC_HOST.search(host.group("host")):
                continue
            skill.add("credential_exfiltration", Severity.HIGH, line,
                      f"sends {assigned.group(1)}, a secret read on {_where(read)} ({read.text.strip()}), in a "
                      f"request to {host.group('host')}, a host the skill does not name: {line.text.strip()}")
            return


def _tunnel_endpoint(skill: _Skill) -> None:
    """A tunnel address (ngrok, trycloudflare…) set as a service endpoint in a config or code file
    of a skill that does not say it uses tunnels: its traffic (an OAuth callback, tokens) is routed
    through a stranger's machine (high)."""
    if _own_tunnel(skill):
        return
    for line in skill.lines:
        if line.file is None or line.caution or not CONFIG_OR_CODE.search(line.file):
            continue
        if TUNNEL_ENDPOINT.search(line.text):
            skill.add("data_exfiltration", Severity.HIGH, line,
                      f"routes the skill's requests through a tunnel address the skill does not say it uses: "
                      f"{line.text.strip()}")
            return


def _own_tunnel(skill: _Skill) -> bool:
    """True if the skill says it works with request catchers or tunnels (its name or description
    names ngrok, webhooks, a tunnel) or runs its own (``ngrok http 3000``): then their addresses are its own."""
    said = f"{skill.name or ''} {skill.description or ''}".lower()
    if re.search(r"ngrok|webhook|tunnel|requestbin|pipedream|telegram|discord|slack", said):
        return True
    return any(rules.TUNNEL_RUN.search(line.text) for line in skill.lines)


def _disk_writes(skill: _Skill, description: str | None) -> None:
    """Writing over a disk device: a warning in a skill that says it formats or flashes disks."""
    declared = description is not None and rules.DISK_WORDS.search(description) is not None
    for line in skill.lines:
        if rules.DISK_WRITE.search(line.text):
            severity = Severity.MEDIUM if declared or line.caution else Severity.HIGH
            skill.add("destructive_command", severity, line,
                      f"overwrites a disk device{'' if declared else ' (the description does not say so)'}: "
                      f"{line.text.strip()}")
            return


def _in_context(skill: _Skill, description: str | None) -> None:
    """Rules whose severity depends on what surrounds them (see rules.SKIP_PERMISSIONS)."""
    mcp = description is not None and rules.MCP_WORDS.search(description) is not None
    done: set[str] = set()
    for index, line in enumerate(skill.lines):
        if "skip" not in done and rules.SKIP_PERMISSIONS.search(line.text):
            near = [other for other in skill.lines[max(0, index - 2):index + 3] if other.file == line.file]
            sandboxed = any(rules.SANDBOX_WORDS.search(other.text) for other in near)
            done.add("skip")
            # A flag a person passes to the agent they run (agent-orchestration skills do) warns;
            # said so that the agent stops asking its user, it is high. Writing bypassPermissions
            # into the settings is the line rule's high finding.
            unasked = any(rules.NO_ASKING.search(other.text) for other in near) and not sandboxed
            skill.add("permission_tampering", Severity.HIGH if unasked and not line.caution else Severity.MEDIUM, line,
                      "turns off the agent's permission prompts"
                      f"{' (inside a sandbox, it says)' if sandboxed else ''}: {line.text.strip()}")
        if "tool" not in done and rules.TOOL_REGISTRATION.search(line.text):
            done.add("tool")
            skill.add("tool_shadowing", Severity.MEDIUM if mcp or line.caution else Severity.HIGH, line,
                      f"registers a tool under a built-in tool's name, so calls meant for it reach this code: "
                      f"{line.text.strip()}")


def _lures(skill: _Skill) -> None:
    # Each sign is looked for once per line; a lure counts the signs of its neighbourhood.
    signs = [(rules.ARCHIVE_PASSWORD.search(line.text) is not None,
              rules.ARCHIVE_OR_BINARY.search(line.text) is not None,
              rules.RUN_WORD.search(line.text) is not None,
              rules.PREREQUISITE.search(line.text) is not None) for line in skill.lines]
    reported: set[str] = set()
    for index, line in enumerate(skill.lines):
        if line.caution:
            continue
        urls = list(rules.URL.finditer(line.text))[:8]
        if not urls:
            continue
        near = [signs[other] for other in range(max(0, index - 3), min(len(skill.lines), index + 4))
                if skill.lines[other].file == line.file]
        password, archive = (any(sign[position] for sign in near) for position in range(2))
        # "Extract it, then open X.exe" often comes a few lines after the link and the password.
        run = any(signs[other][2] for other in range(max(0, index - 3), min(len(skill.lines), index + 9))
                  if skill.lines[other].file == line.file)
        prerequisite = any(signs[other][3] for other in range(max(0, index - 6), min(len(skill.lines), index + 4))
                           if skill.lines[other].file == line.file)
        fetches = FETCH_LINE.search(line.text) is not None
        linked = MARKDOWN_LINK.search(line.text) is not None and any(
            rules.DOWNLOAD_WORD.search(other.text) for other in skill.lines[max(0, index - 1):index + 2]
            if other.file == line.file)
        for url in urls:
            host, path = url.group("host"), (url.group("path") or "").split("?")[0]
            binary = BINARY_PATH.search(path) is not None
            if (binary or linked or fetches) and password and archive and run \
                    and "lure_archive" not in reported:
                reported.add("lure_archive")
                skill.add("lure_archive", Severity.HIGH, line,
                          f"download a password-protected archive from {host} and run what is inside "
                          f"(a password hides the payload from scanners): {line.text.strip()}")
            risk = host_risk(host)
            # The skill's own service (``openclaws-….workers.dev`` of the skill openclaws) warns, never more.
            own = risk is not None and _named_like_skill(host, skill.name)
            if prerequisite and run and "lure_prerequisite" not in reported and (binary or risk is not None) \
                    and (risk is not None or not official(host)):
                reported.add("lure_prerequisite")
                skill.add("lure_prerequisite", Severity.HIGH if risk is not None and not own else Severity.MEDIUM, line,
                          f"asks you to download and run a 'prerequisite' from {host}"
                          f"{' (' + risk[1] + ')' if risk else ''}: {line.text.strip()}")
            if risk is not None and host not in reported and len(reported) < 64:
                reported.add(host)
                # An image shown from a file host (``![logo](https://files.catbox.moe/x.png)``) is not a lure.
                image = IMAGE_PATH.search(path) is not None and "![" in line.text
                pasted = run and not image and (rules.PASTE_HOST.search(host) or rules.RAW_IP_HOST.search(host))
                severity = Severity.HIGH if (fetches or binary or pasted) and not own else risk[0]
                skill.add("suspicious_link", severity, line,
                          f"{'fetches from' if fetches else 'links to'} {risk[1]}"
                          f"{', named like the skill itself' if own else ''}: {line.text.strip()}")


def _named_like_skill(host: str, name: str | None) -> bool:
    """True if a label of ``host`` is the skill's own name (hyphens aside, 5+ letters): a look-alike
    of a brand that is the skill's own service, not a lure."""
    if not name:
        return False
    wanted = re.sub(r"[^a-z0-9]", "", name.lower())
    if len(wanted) < 5 or rules.RAW_IP_HOST.search(host) or rules.PASTE_HOST.search(host):
        return False
    return any(label.replace("-", "") == wanted or label == wanted
               for part in host.lower().split(".")[:-1] for label in [part, *part.split("-")])


def _split_with_image(skill: _Skill) -> None:
    """SKILL.md telling the agent to complete a sentence from a picture it ships: high."""
    images = [line for line in skill.lines if line.file is None and LOCAL_IMAGE.search(line.text)]
    for line in skill.lines:
        if line.file is not None or not SPLIT_WORDS.search(line.text):
            continue
        image = next((other for other in images if abs(other.number - line.number) <= NEAR_LINES), None)
        if image is not None:
            skill.add("split_instruction", Severity.HIGH, line,
                      f"tells the agent to complete an instruction from a picture the skill ships "
                      f"({_where(image)}: {image.text.strip()}): what the sentence says is hidden in the image")
            return


DECODED_SIGNS = re.compile(
    r"\b(?:curl|wget|bash|powershell|iex|nc|ncat)\b[^\n]{0,200}(?:https?://|\|)|\bhttps?://[a-z0-9.-]{1,253}"
    r"|\b(?:eval|exec|system)\s{0,3}\(", re.IGNORECASE)


def _decoded(skill: _Skill, files: list[tuple[str | None, str]]) -> None:
    budget = decode.Budget()
    # A decoded text is judged where its source line sits (a security skill's fenced example).
    fenced = {(line.file, line.number) for line in skill.lines if line.in_fence}
    for path, text in files:
        seen = 0
        texts: set[tuple[int, str]] = set()
        if budget.full():
            break
        items = decode.decoded_texts(text, budget)
        if budget.full():
            # Padding a skill with encoded text must not hide what comes after it silently.
            skill.add("decode_limit", Severity.MEDIUM, _Line(path, items[-1].line if items else 1, "", False),
                      f"more encoded or assembled text than the scanner decodes ({len(budget.found)} texts, "
                      f"{budget.chars} characters, {budget.work} bytes of work): what follows was not decoded")
        for item in items:
            if (item.line, item.text) in texts:
                continue
            texts.add((item.line, item.text))
            lowered = unicode.fold(item.text)
            hits = sorted({rule.rule for rule in rules.LINE_RULES
                           if rule.severity == Severity.HIGH and rule.pattern.search(lowered)})
            if (rules.STRONG_SECRET.search(lowered) or rules.CODE_SECRET.search(lowered)) and (
                    rules.UPLOAD_SINK.search(lowered) or rules.EXFIL_SINK.search(lowered)):
                hits.append("credential_exfiltration")
            at = _Line(path, item.line, lowered, False, (path, item.line) in fenced)
            if hits:
                skill.add("decoded_payload", Severity.HIGH, at,
                          f"{item.how} decodes to a payload ({', '.join(hits)}): {item.text.strip()}")
                seen += 1
            elif DECODED_SIGNS.search(lowered) and not item.how.startswith(decode.ASSEMBLED_HOWS):
                skill.add("decoded_payload", Severity.MEDIUM, at,
                          f"{item.how} decodes to a command or a link: {item.text.strip()}")
                seen += 1
            if seen >= 8:
                break


# "Fetch https://… and follow its instructions": what the agent will do is decided elsewhere, after the scan.
FETCH_AND_FOLLOW = re.compile(
    r"\b(?:fetch|retrieve|load|read|curl|get|pull)\b(?:[^.\n]|\.(?=\S)){0,120}?\b(?:and|then)\s{1,3}(?:then\s{1,3})?(?:follow|obey"
    r"|execute|carry out|apply|do)\s{1,3}(?:(?:its|their|any|all|whatever|the)\s{1,3}(?:\w{1,20}\s{1,3})?(?:instructions?"
    r"|directives?|commands?|steps)\b(?:\s{1,3}(?:in it|there|inside|it (?:gives|contains|says)))?|what it says|them\b)",
    re.IGNORECASE)
# "Follow the instructions in the picture": the instruction is where a reader of the text does not look
# ("extract the big picture … and apply judgment" is an idiom, not a picture).
MEDIA_INSTRUCTION = re.compile(
    r"\b(?:follow|obey|execute|carry out|apply|run|do|perform)\b[^.\n]{0,30}?\b(?:instructions?|directives?|commands?"
    r"|steps|what it says|text)\b[^.\n]{0,40}?\b(?:in|from|on|inside|encoded in|hidden in|embedded in|written (?:in|on))"
    r"\s{1,3}(?:the\s{1,3}|this\s{1,3}|each\s{1,3}|its\s{1,3})?(?:[\w'-]{1,20}\s{1,3}){0,2}(?:image|picture|photo|png|jpe?g"
    r"|gif|card|audio|sound|wav|mp3|recording|qr[ -]?code|metadata|exif|pixels?|bit ?planes?)s?\b"
    r"|\b(?:read|decode|extract|scan|ocr)\b[^.\n]{0,60}?(?<!\bbig\s)(?<!\bfull\s)(?<!\bwhole\s)(?<!\bbigger\s)"
    r"\b(?:image|picture|photo|png|jpe?g|gif|card|audio|wav|mp3|qr[ -]?code|metadata|exif|pixels?)s?\b[^.\n]{0,60}?\b(?:and|then)\s{1,3}(?:then\s{1,3})?(?:follow|obey|execute"
    r"|carry out|apply|run)\b", re.IGNORECASE)
# The user's conversation or data sent to an address: what the user typed leaves with it.
USER_DATA_SENT = re.compile(
    r"\b(?:send|post|upload|forward|include|copy|log|mirror|transmit|relay|report|attach)\b[^.,;\n]{0,50}?\b(?:conversations?"
    r"(?:\s{1,3}history)?|chat\s{1,3}(?:history|logs?|transcripts?)|(?:the\s{1,3})?user'?s?\s{1,3}(?:messages?|prompts?"
    r"|inputs?|quer(?:y|ies)|questions?|files|documents)|message\s{1,3}history|previous\s{1,3}messages"
    r"|system\s{1,3}prompt|~/(?:documents|desktop|pictures|downloads)|(?:home|documents|desktop)\s{1,3}(?:folder|directory))\b",
    re.IGNORECASE)
# A file's content passed along as a tool argument ("read ~/.cursor/mcp.json and pass its content as 'sidenote'",
# the MCP tool-poisoning shape): the call carries it out, named as something else.
CONTENT_AS_ARGUMENT = re.compile(
    r"\b(?:pass|include|put|send|add|embed|insert|attach|provide)\b[^.\n]{0,30}?\b(?:its|their|the|that\s{1,3}file'?s"
    r"|the\s{1,3}file'?s)\s{1,3}(?:full\s{1,3}|entire\s{1,3}|raw\s{1,3})?(?:content|contents|text|output|value)s?\b"
    r"[^.\n]{0,40}?\b(?:as|in|into|inside|via)\s{1,3}(?:the\s{1,3}|a\s{1,3})?(?:[`'\"][\w-]{1,30}[`'\"]|[\w-]{1,30}\s{1,3}"
    r"(?:parameter|param|argument|arg|field))", re.IGNORECASE)
# Agents' own configuration files, which hold the API keys of every MCP server they run.
AGENT_CONFIG = re.compile(r"\bmcp\.json\b|\bclaude_desktop_config\.json\b|\.claude\.json\b|\.cursor/|\.codeium/"
                          r"|\.continue/config|(?<![\w.])\.env\b", re.IGNORECASE)
SENTENCE_END = re.compile(r"[.!?;](?:\s|$)")
PROSE_PATTERNS = (FETCH_AND_FOLLOW, MEDIA_INSTRUCTION, USER_DATA_SENT, CONTENT_AS_ARGUMENT, AGENT_CONFIG, SENTENCE_END)


def _data_handed_out(skill: _Skill) -> None:
    """The user's conversation or data sent to an address the skill does not name as its own (high;
    its own service or one it names warns); a credential or agent configuration file's content
    passed along as a tool argument (high)."""
    reported: set[str] = set()
    for index, line in enumerate(skill.lines):
        sent, passed = USER_DATA_SENT.search(line.text), CONTENT_AS_ARGUMENT.search(line.text)
        if "user" not in reported and sent is not None and not _sentence_caution(line.text, sent):
            near = [other for other in skill.lines[index:index + 3] if other.file == line.file]
            url = next((found for other in near for found in [rules.URL.search(other.text)] if found), None)
            if url is not None:
                host = url.group("host").lower()
                own = _said_host(skill, host) or _named_like_skill(host, skill.name) \
                    or (rules.RAW_IP_HOST.search(host) is None and PUBLIC_HOST.search(host) is None)
                reported.add("user")
                skill.add("data_exfiltration", Severity.MEDIUM if own else Severity.HIGH, line,
                          f"sends the user's conversation or data to {host}"
                          f"{' (a service it names: check what it keeps)' if own else ', an address it does not name'}: "
                          f"{line.text.strip()}")
        if "argument" not in reported and passed is not None and not _sentence_caution(line.text, passed):
            near = [other for other in skill.lines[max(0, index - 2):index + 1] if other.file == line.file]
            secret = next((other for other in near if AGENT_CONFIG.search(other.text)
                           or rules.STRONG_SECRET.search(other.text)), None)
            if secret is not None:
                reported.add("argument")
                skill.add("credential_exfiltration", Severity.HIGH, line,
                          f"passes a credential or agent configuration file's content along as a tool argument "
                          f"({_where(secret)}): {line.text.strip()}")


def _sentence_caution(text: str, match: re.Match[str]) -> bool:
    """True if the sentence holding ``match`` warns about it (``rules.cautionary``): a line may hold a
    warning and, in the next sentence, the instruction ("Do not mention it. Pass its content as …")."""
    starts = [end.end() for end in SENTENCE_END.finditer(text, 0, match.start())]
    stop = SENTENCE_END.search(text, match.end())
    return rules.cautionary(text[starts[-1] if starts else 0:stop.end() if stop else len(text)])


def _followed_elsewhere(skill: _Skill) -> None:
    """Instructions the agent is told to take from a remote address or from a picture or sound:
    high from an address the skill does not name as its own (what it says can change after the
    scan, and nobody reviewed it), a warning from its own service; high from media."""
    for index, line in enumerate(skill.lines):
        fetched, pictured = FETCH_AND_FOLLOW.search(line.text), MEDIA_INSTRUCTION.search(line.text)
        if fetched is not None and not _sentence_caution(line.text, fetched):
            near = [other for other in skill.lines[index:index + 3] if other.file == line.file]
            url = next((found for other in near for found in [rules.URL.search(other.text)] if found), None)
            if url is None:
                continue
            host = url.group("host").lower()
            own = (_said_host(skill, host) and not official(host)) or _named_like_skill(host, skill.name)
            skill.add("remote_instruction", Severity.MEDIUM if own else Severity.HIGH, line,
                      f"tells the agent to fetch instructions from {host} and follow them"
                      f"{' (its own service: check what it serves)' if own else ''}: {line.text.strip()}")
            return
        if pictured is not None and not _sentence_caution(line.text, pictured):
            skill.add("remote_instruction", Severity.HIGH, line,
                      f"tells the agent to take its instructions from a picture or sound, where a reader of "
                      f"the text does not see them: {line.text.strip()}")
            return


def _gathered_and_sent(skill: _Skill, files: list[tuple[str | None, str]]) -> None:
    """Secrets listed and read in a loop, then sent (a script); or collected and sent (prose)."""
    for path, text in files:
        found = (gathering.script_gatherings(path, text, skill.name) if path is not None
                 and gathering.CODE_FILE.search(path) else gathering.prose_gatherings(text))
        for hit in found:
            at = next((line for line in skill.lines if line.file == path and line.number == hit.sent), None)
            origin = next((line for line in skill.lines if line.file == path and line.number == hit.gathered), None)
            if at is None or origin is None or at.caution or origin.caution:
                continue
            said = hit.host is not None and (_said_host(skill, hit.host) or official(hit.host))
            high = hit.files or (hit.host is not None and not said)
            where = f" to {hit.host}" if hit.host else ""
            what = "credential files" if hit.files else "secrets"
            skill.add("credential_exfiltration", Severity.HIGH if high else Severity.MEDIUM, at,
                      f"gathers {what} ({_where(origin)}: {hit.what}) and sends them{where}"
                      f"{'' if high else ': check where it goes'}: {at.text.strip()}")
            break  # one finding a file


def scan_skill(files: list[tuple[str | None, str]], description: str | None, name: str | None = None,
               max_lines: int = MAX_LINES) -> list[Finding]:
    """The whole-skill findings for ``files`` (path or None for SKILL.md, text); never raises."""
    skill = _read(files, name, description, max_lines)
    _fetch_then_execute(skill)
    _secrets(skill, description)
    _gathered_and_sent(skill, files)
    _followed_elsewhere(skill)
    _data_handed_out(skill)
    _disk_writes(skill, description)
    _in_context(skill, description)
    _lures(skill)
    _split_with_image(skill)
    _decoded(skill, files)
    for hit in posture.findings(skill.lines, lambda host: _said_host(skill, host)):  # posture.py: defences, memory
        skill.add(hit.rule, hit.severity, skill.lines[hit.index], hit.why)
    return skill.findings

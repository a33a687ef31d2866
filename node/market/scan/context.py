"""Context: where a line sits in a skill decides how much a match on it means (issue 39).

The line rules cannot tell a command *given* from a command *shown*. A few contexts
can, and each lowers a finding to a named ``reason`` the user reads next to it, never
to nothing:

- **a security skill's examples**: the skill's name or description says it is about
  security (a scanner, an audit, injection detection...), and the line is in one of its
  test files (``tests/``, ``test_*.py``), inside a fenced block of one of its
  documentation files (``references/``, ``docs/``, a Markdown resource), or defines a
  regular expression in one of its resource files (``re.compile(r"..."``), or is a
  `code span` in prose of one of its documentation files: low. In
  SKILL.md itself, only a fence introduced by a warning ("a malicious skill looks
  like:") counts, and only one step down: SKILL.md is what the agent follows.
- **an official installer**: ``curl … https://astral.sh/uv/install.sh | sh`` and the
  like, with the host and path of the tool's documented installer over https and no
  other URL on the line: low in a Dockerfile, a script or a reference document,
  medium (a warning naming the tool) in SKILL.md. A look-alike host, plain http or a
  second URL keeps the rule's own severity.
- **the skill's own installer**: ``curl … | bash`` from the repository of the skill (owner or
  name like the skill's, or an owner its description names) or from the domain of its declared
  ``homepage``: a warning naming it, never an excuse; ``curl <url> | bash`` (no address): a warning.
- **a scanner's README and saved reports** (not what the agent follows): one step down.
- **cookies in a browser-automation skill**: "use the existing logins/cookies" in a
  skill whose description says it drives a browser is what the skill is for; a
  browser profile path (``.../Default/Cookies``, ``Application Support``) is not
  excused.
- **a quiet test run**: "run the test suite silently" with no user, URL or upload on
  the line is about output, not concealment.

Hidden text and homoglyph-only matches are never excused (the scanner does not ask).
A seller can claim to be a security skill; what that buys is only the examples in its
tests and reference fences, never SKILL.md's instructions nor hidden text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from node.market.scan.findings import Severity

SECURITY = re.compile(
    r"\b(?:security|secure|scanners?|scanning|detect(?:s|or|ors|ion)?|audit(?:s|ing|or)?|vulnerabilit(?:y|ies)"
    r"|malware|threats?|injections?|red[- ]?team(?:ing)?|pentest(?:s|ing)?|penetration|exploits?|forensics?"
    r"|hardening|incident|sast|dast|appsec|infosec)\b", re.IGNORECASE)
BROWSER = re.compile(
    r"\b(?:browsers?|playwright|puppeteer|selenium|chrom(?:e|ium)|headless|web automation|webdriver"
    r"|cdp)\b", re.IGNORECASE)
BROWSER_PROFILE = re.compile(
    r"~/|\\|appdata|application support|/default/|profiles?\b|\.config/|/network/|\.sqlite|cookies\.(?:db|txt)"
    r"|user data", re.IGNORECASE)
QUIET_RUN = re.compile(r"\b(?:tests?|test suite|pytest|unittest|jest|vitest|specs?|linters?|lint|ci|build"
                       r"|benchmarks?|checks)\b", re.IGNORECASE)
QUIET_WORD = re.compile(r"\bsilently\b", re.IGNORECASE)
NOT_QUIET = re.compile(r"\b(?:user|human|operator|secretly|covertly|upload|send|post|exfiltrate|forward)\b"
                       r"|://|@", re.IGNORECASE)
URL = re.compile(r"https?://[^\s\"'`|)>]{1,300}", re.IGNORECASE)
# A regular expression being defined: what a scanner's code is made of, never run as a command.
PATTERN_LITERAL = re.compile(r"\bre\.(?:compile|search|match|fullmatch|findall|finditer)\s{0,3}\(\s{0,3}r?[\"']"
                             r"|\bnew\s{1,3}regexp\s{0,3}\(|\bregexp?\.(?:mustcompile|compile)\s{0,3}\("
                             r"|\b(?:regex|pattern|re)[\"']?\s{0,3}[:=]\s{0,3}r?[/\"']|^\s{0,12}r?[/\"'][^\n]{0,300}\\s[+*{]",
                             re.IGNORECASE)
DOC_DIRS = ("references/", "reference/", "docs/", "doc/", "examples/", "templates/", "assets/")
TEST_FILE = re.compile(r"(?:^|/)(?:tests?|__tests__|spec|fixtures|tests?[-_](?:fixtures|data|cases)|testdata)/|(?:^|/)test_[^/]{1,100}$"
                       r"|_test\.[a-z]{1,5}$|\.(?:test|spec)\.[a-z]{1,5}$", re.IGNORECASE)

# The documented one-line installers of well-known tools: exact https host and path prefix.
OFFICIAL_INSTALLERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "uv": ("astral.sh", ("/uv/",)),
    "ruff": ("astral.sh", ("/ruff/",)),
    "rustup": ("sh.rustup.rs", ("", "/")),
    "nvm": ("raw.githubusercontent.com", ("/nvm-sh/nvm/",)),
    "Homebrew": ("raw.githubusercontent.com", ("/Homebrew/install/",)),
    "deno": ("deno.land", ("/install.sh", "/x/install/")),
    "bun": ("bun.sh", ("/install",)),
    "Poetry": ("install.python-poetry.org", ("", "/")),
    "pnpm": ("get.pnpm.io", ("/install.sh",)),
    "Docker": ("get.docker.com", ("", "/")),
    "Ollama": ("ollama.com", ("/install.sh",)),
    "Oh My Zsh": ("raw.githubusercontent.com", ("/ohmyzsh/ohmyzsh/",)),
    "Starship": ("starship.rs", ("/install.sh",)),
    "Volta": ("get.volta.sh", ("", "/")),
    "pixi": ("pixi.sh", ("/install.sh",)),
    "Tailscale": ("tailscale.com", ("/install.sh",)),
    "Proton Pass": ("proton.me", ("/download/",)),
    "the Azure CLI": ("aka.ms", ("/InstallAzureCLI",)),
    "flyctl": ("fly.io", ("/install.sh",)),
    "Claude Code": ("claude.ai", ("/install.sh",)),
    "babashka": ("raw.githubusercontent.com", ("/babashka/babashka/",)),
    "the Solana CLI": ("release.solana.com", ("/stable/", "/beta/", "/edge/", "/v")),
    "the Solana CLI (Anza)": ("release.anza.xyz", ("/stable/", "/beta/", "/edge/", "/v")),
    "Foundry": ("foundry.paradigm.xyz", ("", "/")),
    "Nix": ("nixos.org", ("/nix/install",)),
    "SDKMAN": ("get.sdkman.io", ("", "/")),
    "opencode": ("opencode.ai", ("/install",)),
    "the Aspire CLI": ("aspire.dev", ("/install.sh", "/install.ps1")),
}
# Where a project publishes its own installer: the skill's own repository (owner or name matches
# the skill's name) on these hosts is "its own installer", a warning, never an excuse.
REPOSITORY_HOSTS = ("raw.githubusercontent.com", "github.com", "gist.githubusercontent.com", "gitlab.com")


@dataclass(frozen=True)
class FileContext:
    """What the scanner knows about one file of a skill before reading its lines."""

    security: bool = False
    browser: bool = False
    file: str | None = None
    name: str | None = None  # the skill's (normalised) name
    description: str | None = None
    homepage: str | None = None  # the front matter's ``homepage``: the skill's own site

    @property
    def skill_md(self) -> bool:
        return self.file is None

    @property
    def test_file(self) -> bool:
        return self.file is not None and TEST_FILE.search(self.file) is not None

    @property
    def doc_file(self) -> bool:
        if self.file is None:
            return False
        lowered = self.file.lower()
        return lowered.startswith(DOC_DIRS) or lowered.endswith((".md", ".markdown", ".rst", ".txt"))

    @property
    def readme(self) -> bool:
        """A README or CHANGELOG at any depth, or a saved report (``reports/``)."""
        if self.file is None:
            return False
        lowered = self.file.lower()
        base = lowered.rsplit("/", 1)[-1]
        return base.startswith(("readme", "changelog")) or lowered.startswith("reports/")

    @property
    def install_file(self) -> bool:
        """A file that installs tools for a person to run: a Dockerfile, a script, a document."""
        if self.file is None:
            return False
        name = self.file.rsplit("/", 1)[-1].lower()
        return (name.startswith(("dockerfile", "containerfile")) or name.endswith((".sh", ".dockerfile"))
                or self.doc_file or self.file.lower().startswith("scripts/"))


def file_context(name: str | None, description: str | None, file: str | None,
                 homepage: str | None = None) -> FileContext:
    declared = f"{name or ''} {description or ''}"
    return FileContext(security=SECURITY.search(declared) is not None,
                       browser=description is not None and BROWSER.search(description) is not None,
                       file=file, name=name, description=description, homepage=homepage)


def example(context: FileContext, in_fence: bool, fence_cautioned: bool,
            line: str = "") -> tuple[Severity, str] | None:
    """The cap on every finding of a line that a security skill shows as an example, or None."""
    if not context.security:
        return None
    if context.test_file:
        return Severity.LOW, "quoted in the tests of a security skill"
    if not context.skill_md and PATTERN_LITERAL.search(line):
        return Severity.LOW, "a detection pattern in a security skill's code"
    if in_fence and context.doc_file:
        return Severity.LOW, "fenced example in security documentation"
    if in_fence and context.skill_md and fence_cautioned:
        return Severity.MEDIUM, "fenced example introduced as an attack to recognise"
    if context.readme:
        # A scanner's README (for people, not followed by the agent) lists what it catches
        # ("- Crypto miners (xmrig, …)"), and its saved reports quote what it found; its references
        # and SKILL.md are what the agent reads and are not excused.
        return Severity.MEDIUM, "named in a security skill's README or reports"
    return None


def official_installer(line: str) -> str | None:
    """The tool whose documented installer is the only URL on ``line``, or None."""
    urls = URL.findall(line)
    if len(urls) != 1:
        return None
    parts = urlsplit(urls[0].rstrip(".,;"))
    if parts.scheme.lower() != "https" or parts.port is not None or parts.username or parts.password:
        return None
    host = (parts.hostname or "").lower()
    for tool, (official_host, prefixes) in OFFICIAL_INSTALLERS.items():
        if host == official_host and any(
                (parts.path == prefix if prefix in ("", "/") else parts.path.startswith(prefix))
                for prefix in prefixes):
            return tool
    return None


def registrable(host: str) -> str:
    parts = host.lower().rstrip(".").split(".")
    return ".".join(parts[-2:])


def own_installer(line: str, name: str | None, description: str | None = None,
                  homepage: str | None = None) -> str | None:
    """``owner/repo`` if the only URL on ``line`` is an https path of a repository named like the
    skill (``raw.githubusercontent.com/<owner>/<repo>/…`` where owner or repo is the skill's name,
    or the owner is a word of its description: ``github.com/botpress/adk`` for "Botpress's ADK");
    the host if it is the domain of the skill's declared ``homepage`` (``treeline.money``)."""
    urls = [urlsplit(url.rstrip(".,;)\"'")) for url in URL.findall(line)[:8]]
    if not urls or not (name or description) or any(url.scheme.lower() != "https" for url in urls):
        return None
    parts = urls[0]
    host = (parts.hostname or "").lower()
    if len(urls) != 1 and ({(url.hostname or "").lower() for url in urls} != {host} or host in REPOSITORY_HOSTS):
        return None  # a second address: only the same own domain (``install.sh`` and ``install.ps1``)
    if host not in REPOSITORY_HOSTS:
        # The domain of the skill's declared homepage (``homepage: https://treeline.money``); a domain
        # merely named like the skill is not enough (a lure is named like what it imitates).
        # Only its installer (``/install.sh``, ``/get``, ``/``): any other script of the declared domain
        # (``https://example.invalid/demo.sh | bash``) is what anyone can declare a homepage for.
        site = urlsplit(homepage.strip()) if homepage else None
        if site is None or site.scheme.lower() != "https" or not site.hostname or "." not in host \
                or any(INSTALLER_PATH.search(url.path) is None for url in urls):
            return None
        return host if registrable(site.hostname) == registrable(host) else None
    segments = [segment.lower() for segment in parts.path.split("/") if segment][:2]
    wanted = {part for part in re.split(r"[^a-z0-9]{1,10}", (name or "").lower()) if len(part) >= 4}
    if len(segments) == 2 and any(part in segment for part in wanted for segment in segments):
        return "/".join(segments)
    described = {word for word in re.split(r"[^a-z0-9-]{1,10}", (description or "").lower()[:1000]) if len(word) >= 5}
    if len(segments) == 2 and segments[0] in described:
        return "/".join(segments)
    return None


# The path of an installer script: ``/install.sh``, ``/installer``, ``/get``, ``/setup.ps1``, the site's root.
INSTALLER_PATH = re.compile(r"^/?$|(?:^|/)(?:[\w.-]{0,40}install[\w.-]{0,40}|get(?:\.\w{1,4})?|setup[\w.-]{0,40}"
                            r"|bootstrap[\w.-]{0,40})/?$", re.IGNORECASE)
# ``curl -sSL <url> | sudo bash``: a usage line with a placeholder where the address goes.
NO_ADDRESS = re.compile(r"\b(?:curl|wget)\b[^|\n]{0,60}\s<[\w -]{1,30}>\s{0,3}\|", re.IGNORECASE)


def installer_severity(context: FileContext, raw: str) -> tuple[Severity, str] | None:
    """download_execute of an official installer: low where tools are installed, else a warning;
    of the skill's own repository's installer: a warning naming it; a usage line without an
    address (``curl <url> | bash``): a warning."""
    if NO_ADDRESS.search(raw) and not URL.search(raw):
        return Severity.MEDIUM, "a usage line with no address (<url>): check what the real command fetches"
    tool = official_installer(raw)
    if tool is None:
        repository = own_installer(raw, context.name, context.description, context.homepage)
        if repository is not None:
            return Severity.MEDIUM, f"runs the installer of its own repository or domain ({repository}): read it before you run it"
        return None
    if context.install_file:
        return Severity.LOW, f"the official installer of {tool}"
    return Severity.MEDIUM, f"runs the official installer of {tool}: check that you want it installed"


def browser_cookies(context: FileContext, line: str, strong_match: str) -> bool:
    """True if a strong secret match is cookies in prose of a browser skill (not a profile path)."""
    return (context.browser and strong_match.lower() == "/cookies"
            and BROWSER_PROFILE.search(line) is None)


def quiet_test_run(line: str, match: str) -> bool:
    """True if a "run … silently" match is about a test run's output."""
    return (QUIET_WORD.search(match) is not None and QUIET_RUN.search(line) is not None
            and NOT_QUIET.search(line) is None)

"""Public skill sets for ``bench_scan.py --public``: a manifest, and the skills read from git mirrors.

The scanner is measured on skills nobody on this project wrote (issue 39). Their code is
never committed here: the committed manifest (``tests/data/skill_scan/public_manifest.json``)
names, for every skill, the source repository, the commit, the skill's folder in it, its
label, what the label rests on, and its split; the skills themselves are read from local git
mirrors of those commits (``/work/.mirror/<owner>+<name>/repo``, or ``--mirror``). Without a
mirror a source is skipped with a message (CI does not run this).

Labels and splits were decided from paths alone, before any content was read:

- the label comes from where the skill sits: a scanner project's ``malicious``/``safe``
  fixture folders, a published collection (benign as published), or a ClawHub archive
  folder of a publisher account that public write-ups of the 2026 ClawHavoc campaign name
  (Koi Security's report and the follow-ups: ``hightower6eu``, ``sakaen736jih``,
  ``zaycv``, ``aslaep123``, ``noreplyboter``, ``jordanprater``, ``gpaitai``, ``rjnpage``)
  — malicious by publisher, not by reading;
- the split is ``holdout`` when the first byte of sha256("source:path") is even, else
  ``tune``; rules were changed only on what the tune part showed.
- a second round of sources (``SECOND_ROUND``, ``"round": 2`` in the manifest: more scanner
  projects' fixture skills, labelled by their folder names) was added and committed before any
  of them was scanned, once the first round's held-out half had been read: the second round's
  held-out half is the clean figure; the first round's held-out half now counts as tune.
- a third round (``THIRD_ROUND``, ``"round": 3``) was added the same way once the second
  round's held-out half had been read while tuning: its held-out half is the clean figure.
  Some of its fixtures are one Markdown file each, not a folder (``FILE_SKILLS``): such a file
  is one skill, read as that skill's SKILL.md.

A "benign" skill of a published collection is benign *as published*: a collection may
carry malware nobody reported, so a quarantine there is counted as a false one but is
worth reading (in the tune part only).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MIRROR = Path("/work/.mirror")
DEFAULT_REVIEW = Path(__file__).resolve().parents[1] / "tests" / "data" / "skill_scan" / "public_labels_review.json"
CLAWHAVOC_PUBLISHERS = frozenset({
    "hightower6eu", "sakaen736jih", "zaycv", "aslaep123", "noreplyboter", "jordanprater", "gpaitai", "rjnpage"})
CLAWHAVOC_BASIS = ("publisher named in public ClawHavoc write-ups (Koi Security, Feb 2026, and follow-ups)")
# Never read, fetched or tuned on: held out by the issue to measure this project.
FORBIDDEN = frozenset({"ShenaoW/MalSkills", "trailofbits/skills", "bolhasec/post-Empirically-Testing-Skill-Scanners",
                       "ydarwish1/Malskill-Scanner"})


def _cisco(path: str) -> tuple[str, str] | None:
    if not path.startswith("evals/"):
        return None
    if "/safe" in path:
        return "benign", "scanner fixture folder 'safe'"
    return "malicious", "scanner fixture folder of an attack category"


def _anthropic(path: str) -> tuple[str, str] | None:
    return ("benign", "published collection") if path.startswith("skills/") else None


def _collection_under(prefix: str) -> Callable[[str], tuple[str, str] | None]:
    """A published collection whose skills sit under ``prefix``: benign as published."""
    def label(path: str) -> tuple[str, str] | None:
        return ("benign", "published collection") if path.startswith(prefix) else None
    return label


def _collection(path: str) -> tuple[str, str] | None:
    return "benign", "published collection"


def _openclaw(path: str) -> tuple[str, str] | None:
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "skills":
        return None
    if parts[1].lower() in CLAWHAVOC_PUBLISHERS:
        return "malicious", CLAWHAVOC_BASIS
    return "benign", "ClawHub archive, publisher not named in a write-up"


def _variants(path: str) -> tuple[str, str] | None:
    return "malicious", "published dataset of malicious SKILL.md variants"


def _fixture_named(malicious: tuple[str, ...], benign: tuple[str, ...]) -> Callable[[str], tuple[str, str] | None]:
    """A scanner project's fixture folders labelled by the words in their names: a folder named by an
    attack (``malicious``, ``exfil``, ``reverse_shell``, ...) is malicious, one named ``safe``/``benign``/
    ``clean`` is benign; a name that says neither (``edge_cases``, ``golden``, schema tests) is left out."""
    def label(path: str) -> tuple[str, str] | None:
        lowered = path.lower()
        if any(word in lowered for word in benign):
            return "benign", "scanner fixture folder named safe/benign/clean/false-positive"
        if any(word in lowered for word in malicious):
            return "malicious", "scanner fixture folder named by an attack"
        return None
    return label


def _skillcamo(path: str) -> tuple[str, str] | None:
    """dongqingli6/skill-scan-aaa: its benchmark reports name the families (from the report, not the
    skills): ``base-NNN`` clean bases, ``base-NNN--skillject``/``--skillcamo-*`` attack variants of them,
    ``benign-eval-*`` benign; in the multimodal set ``benign-*`` benign, every other sample a payload
    carrier; ``asg/samples`` named by attack or ``benign_*``; ``tools/scr_extra_cases/benign_*``. The
    authorization-chain scenarios (``scr_adversarial``, ``auth_blur``/``cap_flow``/``trust_lift``) pair a
    benign and an acting skill in one folder and are left out, as is ``analysis_results`` (real skills
    under study, no label in the path)."""
    name = posixpath.basename(path)
    if path.startswith("artifacts/skillcamo-smoke/skills/"):
        if "--skillject" in name or "--skillcamo" in name:
            return "malicious", "attack family skillject/skillcamo named in the path"
        return "benign", "clean base or benign-eval family named in the path"
    if path.startswith("artifacts/multimodal-mix/skills/"):
        if name.startswith("benign-"):
            return "benign", "multimodal sample named benign-"
        return "malicious", "multimodal payload-carrier sample (not named benign-)"
    if path.startswith("asg/samples/"):
        return ("benign", "sample named benign_") if name.startswith("benign") else (
            "malicious", "sample named by an attack")
    if path.startswith("tools/scr_extra_cases/benign_"):
        return "benign", "scenario folder named benign_"
    return None


def _malwar(path: str) -> tuple[str, str] | None:
    """Ap6pack/malwar: one Markdown file per fixture skill under ``tests/fixtures/skills/``;
    ``malicious/`` (synthetic) and ``real/malicious/`` (its README: real-world malicious) are malicious,
    ``benign/`` benign. ``real/benign/`` (copies of anthropics/skills, a first-round source) and
    ``real/clawhub/`` (real ClawHub samples with no label in the path) are left out."""
    folder = posixpath.dirname(path)
    if folder in ("tests/fixtures/skills/malicious", "tests/fixtures/skills/real/malicious"):
        return "malicious", "fixture file in a folder named malicious (synthetic, or real-world per its README)"
    if folder == "tests/fixtures/skills/benign":
        return "benign", "fixture file in a folder named benign"
    return None


def _progent(path: str) -> tuple[str, str] | None:
    """Agentic-AI-Risk-Mitigation/progent: ``datasets/skill_injection/skill_files/<NN_attack_class>/``,
    one SKILL.md specimen per file, every one an attack specimen (its README: "realistic malicious
    skill file specimens", ten per attack class)."""
    if path.startswith("datasets/skill_injection/skill_files/") and path.count("/") == 4:
        return "malicious", "SKILL.md specimen in a folder named by an attack class (dataset of attack specimens)"
    return None


def _skillscan(path: str) -> tuple[str, str] | None:
    """kurtpayne/skillscan: ``tests/adversarial/cases/aNN_<attack>`` are attack cases except the
    ``*_benign`` ones; ``tests/fixtures/malicious/*`` and ``tests/fixtures/benign/*``; the example
    ``examples/benign_skill``. ``examples/suspicious_skill``, ``trace-demos`` and the policy and
    dependency fixtures say neither and are left out."""
    name = posixpath.basename(path)
    if path.startswith("tests/adversarial/cases/"):
        return (("benign", "fixture folder named benign") if name.endswith("_benign")
                else ("malicious", "adversarial case folder named by an attack"))
    if path.startswith("tests/fixtures/malicious/"):
        return "malicious", "adversarial case folder named by an attack"
    if path.startswith("tests/fixtures/benign/") or path == "examples/benign_skill":
        return "benign", "fixture folder named benign"
    return None


CLAWHAVOC_SAMPLE = 8  # the later archive: one ClawHavoc-publisher folder in 8, chosen by a hash of its path


def _clawhub_later(path: str) -> tuple[str, str] | None:
    """coolboylcy/skills, a later snapshot of the ClawHub archive (2026-02-28, openclaw/skills is of
    2026-01-31): only the folders of the publishers the ClawHavoc write-ups name (malicious by
    publisher, as in the first round), one in ``CLAWHAVOC_SAMPLE`` by the second byte of
    sha256("clawhavoc-sample:" + path) (the split uses the first byte of another hash). Its other
    folders are left out (the first round's archive covers ClawHub's benign skills)."""
    parts = path.split("/")
    if len(parts) != 3 or parts[0] != "skills" or parts[1].lower() not in CLAWHAVOC_PUBLISHERS:
        return None
    if hashlib.sha256(f"clawhavoc-sample:{path}".encode()).digest()[1] % CLAWHAVOC_SAMPLE:
        return None
    return "malicious", CLAWHAVOC_BASIS


LABELLERS: dict[str, Callable[[str], tuple[str, str] | None]] = {
    "anthropics/skills": _anthropic,
    "obra/superpowers": _collection,
    "ComposioHQ/awesome-claude-skills": _collection,
    "openclaw/skills": _openclaw,
    "cisco-ai-defense/skill-scanner": _cisco,
    "liangjinghan035-max/Malicious-SKILL.md-Research-Dataset-Adversarial-Variants": _variants,
    # Added for a second, clean held-out measurement (the first held-out half was read while tuning).
    "1997xxx/X-Skill-Scanner": _fixture_named(("/malicious/",), ("/safe/",)),
    "thedevappsecguy/skill-scanner": _fixture_named(("payload", "exfil", "inject"), ("clean_",)),
    "kkdub/skill-scan": _fixture_named(("red-team/",), ("valid-skill",)),
    "xiexie-qiuligao/openclaw-skill-guard": _fixture_named(
        ("high-risk", "install-risk", "prompt-risk", "hidden-instruction", "companion-doc-poisoning"),
        ("/benign", "false-positive", "normal-")),
    "dongqingli6/skill-scan-aaa": _skillcamo,
    # Added for a third clean held-out measurement (the second held-out half was read while tuning).
    "Ap6pack/malwar": _malwar,
    "Agentic-AI-Risk-Mitigation/progent": _progent,
    "kurtpayne/skillscan": _skillscan,
    "openai/skills": _collection_under("skills/"),
    "vercel-labs/agent-skills": _collection_under("skills/"),
    "github/awesome-copilot": _collection_under("skills/"),
    "K-Dense-AI/claude-scientific-skills": _collection_under("scientific-skills/"),
    "coolboylcy/skills": _clawhub_later,
}
# The second round of sources (2026-11-28): added after the first held-out half had been read while
# tuning, so their held-out half is the clean measurement; the first round's held-out half counts as tune.
SECOND_ROUND = frozenset(source for source in LABELLERS if source in {
    "1997xxx/X-Skill-Scanner", "thedevappsecguy/skill-scanner", "kkdub/skill-scan",
    "xiexie-qiuligao/openclaw-skill-guard", "dongqingli6/skill-scan-aaa"})
# The third round (2026-11-28): added after the second held-out half had been read while
# tuning, committed before any of its skills was scanned; its held-out half is the clean measurement.
THIRD_ROUND = frozenset(source for source in LABELLERS if source in {
    "Ap6pack/malwar", "Agentic-AI-Risk-Mitigation/progent", "kurtpayne/skillscan", "openai/skills",
    "vercel-labs/agent-skills", "github/awesome-copilot", "K-Dense-AI/claude-scientific-skills", "coolboylcy/skills"})
# A later snapshot of an earlier round's source: a folder that source already holds at the same path
# is left out (an update of a skill the earlier round had, not a new one).
LATER_SNAPSHOT_OF = {"coolboylcy/skills": "openclaw/skills"}
# Sources whose fixtures are single Markdown files: every ``*.md`` under these folders (not a
# README) is one skill, read as its SKILL.md.
FILE_SKILLS = {"Ap6pack/malwar": ("tests/fixtures/skills/",),
               "Agentic-AI-Risk-Mitigation/progent": ("datasets/skill_injection/skill_files/",)}
# A source read at a commit other than its newest (kkdub/skill-scan removed its red-team corpus later).
PINNED = {"kkdub/skill-scan": "da98f37f3367c15eefabf35c5d12482e1d3d55a7"}


def round_of(source: str) -> int:
    """Which round of sources ``source`` was added in (1, 2 or 3)."""
    return 3 if source in THIRD_ROUND else 2 if source in SECOND_ROUND else 1


def split_of(source: str, path: str) -> str:
    return "holdout" if hashlib.sha256(f"{source}:{path}".encode()).digest()[0] % 2 == 0 else "tune"


def mirror_of(mirror: Path, source: str) -> Path:
    return mirror / source.replace("/", "+") / "repo"


def _git(repo: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *arguments], check=True, capture_output=True,
                          text=True).stdout


def build_manifest(mirror: Path = DEFAULT_MIRROR) -> list[dict[str, str]]:
    """Every skill of every source: a folder holding SKILL.md (not inside another one), or one
    Markdown file of a ``FILE_SKILLS`` folder. A third-round skill whose SKILL.md is byte for byte
    one an earlier round holds (same git blob id: a copy, e.g. of an anthropics/skills skill) is left
    out: it was tuned on already; so is a folder of a later snapshot (``LATER_SNAPSHOT_OF``) that the
    earlier snapshot holds at the same path. Labels come from paths only."""
    entries: list[dict[str, str]] = []
    earlier: set[str] = set()  # blob ids of the SKILL.md of every first- and second-round skill
    held: set[tuple[str, str]] = set()  # (source, path) of every skill taken so far
    for source, labeller in sorted(LABELLERS.items(), key=lambda item: round_of(item[0]) == 3):
        assert source not in FORBIDDEN
        repo = mirror_of(mirror, source)
        if not repo.exists():
            print(f"{source}: no mirror at {repo}, not in the manifest")
            continue
        commit = PINNED.get(source) or _git(repo, "rev-parse", "HEAD").strip()
        blobs = {path: meta.split()[2] for meta, path in (
            line.split("\t", 1) for line in _git(repo, "ls-tree", "-r", commit).splitlines())}
        folders = sorted(posixpath.dirname(path) for path in blobs if posixpath.basename(path) == "SKILL.md")
        kept: list[str] = []
        for folder in folders:
            if folder and not any(folder.startswith(parent + "/") for parent in kept):
                kept.append(folder)
        kept += sorted(path for path in blobs if path.endswith(".md") and posixpath.basename(path).lower() != "readme.md"
                       and posixpath.basename(path) != "SKILL.md" and path.startswith(FILE_SKILLS.get(source, ("\0",))))
        for folder in kept:
            labelled = labeller(folder)
            if labelled is None:
                continue
            blob = blobs[folder] if folder.endswith(".md") and folder in blobs else blobs[folder + "/SKILL.md"]
            if round_of(source) < 3:
                earlier.add(blob)
            elif blob in earlier:
                print(f"{source}:{folder}: a copy of an earlier round's skill, left out")
                continue
            elif source in LATER_SNAPSHOT_OF and (LATER_SNAPSHOT_OF[source], folder) in held:
                print(f"{source}:{folder}: {LATER_SNAPSHOT_OF[source]} holds this folder, left out")
                continue
            label, basis = labelled
            entries.append({"source": source, "commit": commit, "path": folder, "label": label,
                            "label_basis": basis, "split": split_of(source, folder)})
            held.add((source, folder))
    return entries


def is_file_skill(entry: dict[str, str]) -> bool:
    """Whether a manifest entry is one Markdown file (``FILE_SKILLS``) rather than a skill folder."""
    return entry["path"].endswith(".md") and entry["path"].startswith(FILE_SKILLS.get(entry["source"], ("\0",)))


@dataclass
class Materialized:
    entry: dict[str, str]
    folder: Path | None  # None: not whole in the mirror
    missing: int = 0


def materialize(entries: list[dict[str, str]], mirror: Path, destination: Path) -> Iterator[Materialized]:
    """Write each entry's files from its mirror under ``destination``; one ``cat-file`` per source."""
    by_source: dict[str, list[dict[str, str]]] = {}
    for entry in entries:
        by_source.setdefault(entry["source"], []).append(entry)
    for source, group in by_source.items():
        repo = mirror_of(mirror, source)
        if not repo.exists():
            print(f"{source}: no mirror at {repo} (fetch it first); {len(group)} skills skipped")
            continue
        batch = subprocess.Popen(["git", "-C", str(repo), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
        assert batch.stdin is not None and batch.stdout is not None
        try:
            for index, entry in enumerate(group):
                single = is_file_skill(entry)
                listing = _git(repo, "ls-tree", "-r", "-z", entry["commit"], "--",
                               entry["path"] if single else entry["path"] + "/")
                name = posixpath.basename(entry["path"])
                target = destination / source.replace("/", "+") / str(index) / (
                    name.removesuffix(".md") if single else name)
                missing = 0
                for record in filter(None, listing.split("\0")):
                    meta, path = record.split("\t", 1)
                    if single and path != entry["path"]:
                        continue
                    mode, kind, oid = meta.split()
                    if kind != "blob" or mode == "120000":
                        continue
                    batch.stdin.write(f"{oid}\n".encode())
                    batch.stdin.flush()
                    header = batch.stdout.readline().split()
                    if len(header) < 3 or header[1] == b"missing":
                        missing += 1
                        continue
                    data = batch.stdout.read(int(header[2]))
                    batch.stdout.read(1)
                    out = target / ("SKILL.md" if single else posixpath.relpath(path, entry["path"]))
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(data)
                yield Materialized(entry, None if missing else target, missing)
        finally:
            batch.stdin.close()
            batch.wait()


FIELDS = ("source", "path", "label", "split")


def load(manifest: Path) -> list[dict[str, str]]:
    """The manifest's skills as dicts (source, commit, path, label, label_basis, split)."""
    data = json.loads(manifest.read_text(encoding="utf-8"))
    out = []
    for row in data["skills"]:
        entry = dict(zip(FIELDS, row, strict=True))
        source = data["sources"][entry["source"]]
        out.append(entry | {"commit": source["commit"], "label_basis": source["label_basis"][entry["label"]],
                            "round": str(source.get("round", 1))})
    return out


REVIEWED_LABELS = frozenset({"malicious", "benign", "excluded", "unclear"})


def load_review(review: Path) -> dict[str, dict[tuple[str, str], str]]:
    """split -> (source, path) -> the label given after reading the skill (``public_labels_review.json``):
    ``skills`` holds the tune part's corrections, ``heldout.skills`` the blind review of the held-out
    part (labels decided before any scanner output of a held-out skill was seen). Each section
    applies to its own split only (``reviewed_label``); an unknown label is refused."""
    if not review.exists():
        return {}
    data = json.loads(review.read_text(encoding="utf-8"))
    sections = {"tune": data.get("skills", []), "holdout": data.get("heldout", {}).get("skills", [])}
    reviews: dict[str, dict[tuple[str, str], str]] = {}
    for split, rows in sections.items():
        labels: dict[tuple[str, str], str] = {}
        for row in rows:
            if row["new"] not in REVIEWED_LABELS:
                raise ValueError(f"{review}: {row['source']}:{row['path']}: unknown label {row['new']!r}")
            labels[(row["source"], row["path"])] = row["new"]
        if labels:
            reviews[split] = labels
    return reviews


def reviewed_label(reviews: dict[str, dict[tuple[str, str], str]], entry: dict[str, str]) -> str | None:
    """The label of a manifest ``entry`` after review: what its own split's review says of it, else
    the manifest's label (a reviewed split keeps every label nobody changed); None when its split
    was not reviewed at all. A review of one split never relabels a skill of the other."""
    labels = reviews.get(entry["split"])
    if labels is None:
        return None
    return labels.get((entry["source"], entry["path"]), entry["label"])


def save(manifest: Path, entries: list[dict[str, str]]) -> None:
    """One line per skill ([source, path, label, split]); each source's commit and label bases once."""
    sources: dict[str, dict[str, object]] = {}
    for entry in entries:
        source = sources.setdefault(entry["source"], {
            "commit": entry["commit"], "label_basis": {}, "round": round_of(entry["source"])})
        bases = source["label_basis"]
        assert isinstance(bases, dict)
        bases[entry["label"]] = entry["label_basis"]
    lines = ",\n".join(json.dumps([entry[field] for field in FIELDS], ensure_ascii=False) for entry in entries)
    about = (__doc__ or "").split("\n\n")[0].replace("\n", " ")
    manifest.write_text(f'{{"about": {json.dumps(about)},\n"split": "holdout if sha256(source:path)[0] is even",\n'
                        f'"sources": {json.dumps(sources, indent=1, sort_keys=True)},\n"skills": [\n{lines}\n]}}\n',
                        encoding="utf-8")

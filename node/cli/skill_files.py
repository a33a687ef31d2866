"""``crystalmesh skill add DIR`` and ``skill install SKILL --to DIR``: skills as Agent Skills folders."""

from __future__ import annotations

import os
from pathlib import Path

import click

from node.cli.context import CliContext, CliError, common_options
from node.cli.network import skill
from protocol.skill_bundle import MAX_BUNDLE_BYTES, MAX_RESOURCES, SKILL_MD, SkillBundle, build


def read_skill_folder(folder: Path) -> SkillBundle:
    """A local skill folder (SKILL.md + small text files) as a validated bundle."""
    skill_md = folder / SKILL_MD if folder.is_dir() else folder
    if not skill_md.is_file():
        raise CliError(f"{skill_md} is not a file; give a skill folder with a SKILL.md or the file")
    resources: dict[str, str] = {}
    if folder.is_dir():
        for root, dirs, files in os.walk(folder, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                path = Path(root) / name
                relative = path.relative_to(folder).as_posix()
                if relative == SKILL_MD or name.startswith(".") or path.is_symlink():
                    continue
                if len(resources) >= MAX_RESOURCES or path.stat().st_size > MAX_BUNDLE_BYTES:
                    raise CliError(f"{folder} holds too many or too large files for a skill bundle")
                try:
                    resources[relative] = path.read_text(encoding="utf-8")
                except UnicodeDecodeError as error:
                    raise CliError(f"{relative} is not UTF-8 text (bundles hold text files only)") from error
    if skill_md.stat().st_size > MAX_BUNDLE_BYTES:
        raise CliError(f"{skill_md} is larger than {MAX_BUNDLE_BYTES} bytes")
    return build(skill_md.read_text(encoding="utf-8"), resources)


@skill.command("add")
@click.argument("folder", type=click.Path(exists=True, path_type=Path))
@click.option("--scope", type=click.Choice(["private", "shared", "public"]), default="public",
              show_default=True, help="Access scope (public or shared to sell it).")
@click.option("--category", default=None, help="Market category.")
@click.option("--tag", "tags", multiple=True, help="Market tag (repeatable).")
@click.option("--namespace", default=None, help="Namespace of the skill memory (default: default).")
@common_options
def add(ctx: CliContext, folder: Path, scope: str, category: str | None, tags: tuple[str, ...],
        namespace: str | None) -> None:
    """Store an Agent Skills folder (FOLDER/SKILL.md + small text files) as a skill crystal."""
    bundle = read_skill_folder(folder)
    body = {"text": bundle.encode(), "type": "skill", "scope": scope, "category": category,
            "tags": list(tags), "namespace": namespace}
    client = ctx.running()
    if client is not None:
        crystal = client.post("/v1/crystals", body)
    else:
        from node.cli.memory import open_memory
        from node.memory.requests import add_from_request

        with open_memory(ctx) as mem:
            crystal = add_from_request(mem, body).to_dict()
    crystal = crystal | {"skill_name": bundle.name, "resources": [path for path, _ in bundle.resources]}
    ctx.emit(crystal, lambda c: click.echo(
        f"{c['id']}  skill {c['skill_name']} ({len(c['resources'])} resource file(s)), "
        f"content hash {c['hash'][:16]}…"))


@skill.command("install")
@click.argument("skill_ref", metavar="LISTING_OR_CRYSTAL")
@click.option("--to", "to_dir", type=click.Path(path_type=Path), required=True,
              help="Skills folder of the agent (the skill goes to DIR/<name>/SKILL.md).")
@click.option("--force", is_flag=True, help="Replace an installed skill of the same name.")
@click.option("--keep-allowed-tools", is_flag=True,
              help="Keep the seller's allowed-tools (tool pre-approval); dropped by default.")
@common_options
def install(ctx: CliContext, skill_ref: str, to_dir: Path, force: bool, keep_allowed_tools: bool) -> None:
    """Install a bought (or own) skill as DIR/<name>/SKILL.md with a provenance line
    (seller, payment tx, content hash); a plain-text skill gets a SKILL.md made for it."""
    from node.agent.skill_install import install as write_skill
    from node.agent.skill_install import source_from_node

    client = ctx.api()
    assert client is not None
    try:
        result = write_skill(source_from_node(client, skill_ref), to_dir.expanduser(), force=force,
                             keep_allowed_tools=keep_allowed_tools)
    finally:
        client.close()
    ctx.emit(result, lambda r: click.echo(
        f"installed {r['name']} at {r['path']}\n  seller   {r['seller']}\n  tx       {r['tx_hash']}\n"
        f"  sha256   {r['content_hash']}"))

"""``crystalmesh memory ...``: the node's local memory.

When a node is running on the data dir the commands go through its API (it
owns the index); otherwise they open the store directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, stderr, table
from node.crystals.model import AccessScope, SemanticType

TYPES = [t.value for t in SemanticType]
SCOPES = [s.value for s in AccessScope]


@contextmanager
def open_memory(ctx: CliContext) -> Iterator[Any]:
    from node.crystals.index import stderr_progress
    from node.memory.facade import Memory

    config = ctx.config()
    if not config.config_path.exists():
        raise CliError(f"{config.data_dir} is not initialised; run `crystalmesh init` first")
    memory = Memory(config, progress=None if ctx.as_json else stderr_progress("indexing"))
    try:
        yield memory
    finally:
        memory.close()


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@click.group()
def memory() -> None:
    """Add, search and maintain this node's knowledge crystals."""


@memory.command("add")
@click.argument("text")
@click.option("--type", "semantic_type", type=click.Choice(TYPES), default="general",
              show_default=True, help="Semantic type.")
@click.option("--scope", type=click.Choice(SCOPES), default=None,
              help="Access scope (default derived from sensitivity: private unless public content).")
@click.option("--path", default=None, help="Source path the text came from.")
@click.option("--ttl", "ttl_s", type=int, default=None, help="Expire after this many seconds.")
@click.option("--category", default=None, help="Skill category (skills).")
@click.option("--tag", "tags", multiple=True, help="Skill tag (repeatable).")
@click.option("--namespace", default=None, help="Namespace (default: default), e.g. user:jonas.")
@common_options
def add(
    ctx: CliContext,
    text: str,
    semantic_type: str,
    scope: str | None,
    path: str | None,
    ttl_s: int | None,
    category: str | None,
    tags: tuple[str, ...],
    namespace: str | None,
) -> None:
    """Store TEXT as a memory in a namespace. Identical text already in that namespace is
    reported (outcome "exists", with any requested field that differs), not stored twice."""
    body = {
        "text": text,
        "type": semantic_type,
        "scope": scope,
        "path": path,
        "ttl_ms": ttl_s * 1000 if ttl_s else None,
        "category": category,
        "tags": list(tags),
        "namespace": namespace,
    }
    client = ctx.running()
    if client is not None:
        crystal = client.post("/v1/crystals", {k: v for k, v in body.items() if v is not None})
    else:
        from node.memory.versions import add_with_outcome

        with open_memory(ctx) as mem:
            crystal = add_with_outcome(mem, body).to_dict()

    def render(c: dict[str, Any]) -> None:
        click.echo(f"{c['id']}  {c['semanticType']}  namespace={c.get('namespace')}  "
                   f"scope={c['governance']['accessScope']}  sensitivity={c['governance']['sensitivity']}")
        if c.get("outcome") == "exists":
            differs = ", ".join(f"{k} stays {v['stored']} (asked {v['requested']})"
                                for k, v in (c.get("differs") or {}).items())
            click.echo("already stored: nothing changed" + (f"; {differs}; use `memory update`"
                                                            if differs else ""))

    ctx.emit(crystal, render)


@memory.command("search")
@click.argument("query")
@click.option("-k", "--limit", "k", type=int, default=10, show_default=True)
@click.option("--type", "types", multiple=True, type=click.Choice(TYPES), help="Filter by type.")
@click.option("--lifecycle", "lifecycles", multiple=True, help="Filter by lifecycle.")
@click.option("--scope", "scopes", multiple=True, type=click.Choice(SCOPES), help="Filter by scope.")
@click.option("--namespace", default=None, help="Namespace to search (default: default).")
@click.option("--all-namespaces", is_flag=True, help="Search every namespace.")
@click.option("--as-of", "as_of", type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"]), default=None,
              help="Search the versions valid at this UTC time instead of now.")
@common_options
def search(
    ctx: CliContext,
    query: str,
    k: int,
    types: tuple[str, ...],
    lifecycles: tuple[str, ...],
    scopes: tuple[str, ...],
    namespace: str | None,
    all_namespaces: bool,
    as_of: datetime | None,
) -> None:
    """Hybrid (dense + BM25) search over the current memories of one namespace."""
    as_of_ms = None if as_of is None else int(as_of.replace(tzinfo=UTC).timestamp() * 1000)
    body: dict[str, Any] = {"query": query, "k": k, "types": list(types),
                            "lifecycles": list(lifecycles), "scopes": list(scopes), "as_of_ms": as_of_ms}
    body |= {"all_namespaces": True} if all_namespaces else {"namespace": namespace or "default"}
    client = ctx.running()
    if client is not None:
        hits = client.post("/v1/crystals/search", body)["hits"]
    else:
        from node.memory.facade import SearchRequest
        from node.memory.namespaces import validate_namespace

        spaces = () if all_namespaces else (validate_namespace(namespace),)
        with open_memory(ctx) as mem:
            hits = [
                hit.to_dict()
                for hit in mem.search(
                    SearchRequest(query, k, tuple(types), tuple(lifecycles), tuple(scopes),
                                  namespaces=spaces, as_of_ms=as_of_ms)
                )
            ]

    def render(items: list[dict[str, Any]]) -> None:
        if not items:
            click.echo("no matches")
            return
        table(
            None,
            ["#", "score", "id", "type", "lifecycle", "text"],
            [
                [i + 1, f"{h['score']:.4f}", h["id"][:8], h["crystal"]["semanticType"],
                 h["crystal"]["lifecycle"], _short(h["crystal"]["text"])]
                for i, h in enumerate(items)
            ],
        )

    ctx.emit(hits, render)


@memory.command("show")
@click.argument("crystal_id")
@common_options
def show(ctx: CliContext, crystal_id: str) -> None:
    """Show one crystal with its governance, provenance and audit trail."""
    client = ctx.running()
    if client is not None:
        data = client.get(f"/v1/crystals/{crystal_id}")
    else:
        with open_memory(ctx) as mem:
            crystal = mem.get(crystal_id)
            data = crystal.to_dict() | {"audit": mem.store.audit_log(crystal.id, 20),
                                        "knowledge": mem.learning.describe(crystal)}

    def render(c: dict[str, Any]) -> None:
        governance = c["governance"]
        click.echo(f"id           {c['id']}")
        click.echo(f"type         {c['semanticType']}   origin {c['origin']}   lifecycle {c['lifecycle']}")
        click.echo(f"scope        {governance['accessScope']}   sensitivity {governance['sensitivity']}"
                   f"   lifespan {governance['lifespanPolicy']}")
        click.echo(f"importance   {c['importanceScore']:.4f}   accesses {c['accessCount']}"
                   f"   last access {_when(c['lastAccessedAt'])}")
        click.echo(f"created      {_when(c['createdAt'])}   hash {c['hash'][:16]}…")
        click.echo(f"memory       {c.get('memoryId')}  v{c.get('version')}  namespace {c.get('namespace')}"
                   + (f"   superseded by {c['supersededBy']} at {_when(c.get('validTo'))}"
                      if c.get("supersededBy") else "")
                   + (f"   expires {_when(c['expiresAt'])}" if c.get("expiresAt") else ""))
        if c.get("stableSkillId") or c["semanticType"] in ("skill", "task_pattern"):
            click.echo(f"skill        stable id {c['stableSkillId']}  v{c['skillVersion']}"
                       f"  executions {c['executions']}  successes {c['successes']}")
        if governance.get("peerOrigin"):
            click.echo(f"peer origin  {governance['peerOrigin']}")
        knowledge = c.get("knowledge") or {}
        if knowledge:
            click.echo(f"confidence   {knowledge['confidence']:.3f}"
                       + (f"   episodes {knowledge['episode_count']}   provenance {knowledge['provenance']}"
                          f"   generation {knowledge['generation']}" if "provenance" in knowledge else ""))
        click.echo("")
        click.echo(c["text"])
        if c.get("audit"):
            click.echo("")
            table("audit", ["when", "action", "from", "to"],
                  [[_when(a["at_ms"]), a["action"], a["from_state"], a["to_state"]] for a in c["audit"]])

    ctx.emit(data, render)


@memory.command("consolidate")
@click.option("--purge", is_flag=True, help="Also delete expired and archived crystals.")
@common_options
def consolidate(ctx: CliContext, purge: bool) -> None:
    """Run one consolidation cycle now (decay, expiry, merges; seed 000)."""
    client = ctx.running()
    if client is not None:
        report = client.post("/v1/memory/consolidate", {"purge": purge})
    else:
        from dataclasses import asdict

        with open_memory(ctx) as mem:
            report = asdict(mem.consolidate(purge=purge))
    ctx.emit(
        report,
        lambda r: click.echo(
            f"scored {r['scored']}, expired {r['expired']} (ttl {r['ttl_expired']}), "
            f"merged {r['merged']}, purged {r['purged']}"
        ),
    )


@memory.command("status")
@common_options
def status(ctx: CliContext) -> None:
    """Counts by lifecycle and type, index state, hormones."""
    client = ctx.running()
    if client is not None:
        data = client.get("/v1/memory/status")
    else:
        with open_memory(ctx) as mem:
            data = mem.status()

    def render(s: dict[str, Any]) -> None:
        click.echo(f"crystals     {s['total']}   ({s['db_path']})")
        click.echo(f"embedder     {s['embedder']} ({s['dim']}-d)   index vectors {s['index']['vectors']}")
        second = s.get("second_opinion")
        if second:  # node.memory.search.second_opinion: crystals without its vector search without it
            lacking = f"   {second['missing']} crystals lack it: run `memory reembed`" if second["missing"] else ""
            click.echo(f"second       {second['encoder']}{lacking}")
        click.echo("lifecycle    " + ", ".join(f"{k} {v}" for k, v in sorted(s["by_lifecycle"].items())))
        click.echo("types        " + ", ".join(f"{k} {v}" for k, v in sorted(s["by_type"].items())))
        click.echo("namespaces   " + ", ".join(f"{k} {v}" for k, v in sorted(s.get("by_namespace", {}).items())))
        h = s["hormones"]
        click.echo(f"hormones     dopamine {h.get('dopamine', 0):.3f}  cortisol {h.get('cortisol', 0):.3f}"
                   f"  oxytocin {h.get('oxytocin', 0):.3f}")
        click.echo(f"consolidated {_when(s.get('last_consolidation_ms'))}")
        tiers = s.get("tiers") or {}
        if tiers:
            click.echo(f"tiers        policy {tiers['policy']}: "
                       + ", ".join(f"{k} {v}" for k, v in tiers["tiers"].items())
                       + f"   session end {_when(tiers.get('last_session_end_ms'))}")

    ctx.emit(data, render)


@memory.command("import")
@click.argument("file", type=click.File("r"), required=False)
@click.option("--type", "semantic_type", type=click.Choice(TYPES), default="general")
@click.option("--testament", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Import a signed testament instead (docs/memory.md).")
@common_options
def import_lines(ctx: CliContext, file: Any, semantic_type: str, testament: Path | None) -> None:
    """Add every non-empty line of FILE as a crystal (or a signed --testament FILE)."""
    from node.crystals.model import SemanticType as ST

    if testament is not None:
        return _import_testament(ctx, testament)
    if file is None:
        raise CliError("memory import needs FILE (or --testament FILE)")

    if ctx.running() is not None:
        raise CliError("a node is running on this data dir; stop it before a bulk import")
    lines = [line.strip() for line in file if line.strip()]
    with open_memory(ctx) as mem:
        created = 0
        batch = 256
        for start in range(0, len(lines), batch):
            chunk = lines[start : start + batch]
            crystals = [mem.prepare(text, semantic_type=ST(semantic_type)) for text in chunk]
            created += sum(1 for r in mem.add_crystals(crystals) if r.created)
            if not ctx.as_json:
                stderr(f"imported {min(start + batch, len(lines))}/{len(lines)}")
    ctx.emit({"lines": len(lines), "created": created},
             lambda r: click.echo(f"{r['created']} new crystals from {r['lines']} lines"))


def _import_testament(ctx: CliContext, path: Path) -> None:
    """``memory import --testament FILE``: verified whole before anything is written (docs/memory.md)."""
    import base64

    from node.memory.learning.testament_io import (
        TestamentRefused,
        import_testament,
        read_testament_file,
    )

    try:
        data = read_testament_file(path)
        client = ctx.running()
        if client is not None:
            result = client.post("/v1/memory/testament/import",
                                 {"testament_b64": base64.b64encode(data).decode("ascii")})
        else:
            with open_memory(ctx) as mem:
                result = import_testament(mem, mem.learning, data)
    except TestamentRefused as error:
        raise CliError(str(error)) from error
    ctx.emit(result, lambda r: click.echo(
        f"imported {r['imported']} of {r['entries']} entries signed by {r['signer']}"
        f" ({r['already_known']} already known)"))

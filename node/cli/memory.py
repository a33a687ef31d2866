"""``crystalmesh memory ...``: the node's local memory.

Through the running node's API when there is one (it owns the index), else
``ctx.client()`` opens the store here (``node.cli.local``): one call either
way. Bulk ``import`` and ``reembed`` run with the node stopped.
"""

from __future__ import annotations

import base64
from contextlib import closing
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, shorten, stderr, table, when
from node.crystals import AccessScope, SemanticType
from node.memory import (
    DEFAULT_IMPORTANCE,
    DEFAULT_NAMESPACE,
    DEFAULT_WINDOW_TOKENS,
    EMBEDDER_NAMES,
    SOURCES,
    origin_label,
)

TYPES = [t.value for t in SemanticType]
SCOPES = [s.value for s in AccessScope]
LIFESPANS = ["decay", "permanent"]
NAMESPACE_HELP = "Namespace (default: default), e.g. user:jonas, agent:planner, session:42."
# Not a click.Choice: the one validation is the search's (node.memory.search), so a wrong value
# is the same clear error, exit 1, with or without a running node.
source_option = click.option(
    "--source", "sources", multiple=True, metavar="SOURCE",
    help=f"Only memories from this source (repeatable): {', '.join(SOURCES)}.")
working_namespace = click.option(
    "--namespace", default=DEFAULT_NAMESPACE, show_default=True,
    help="Working-memory namespace (<data dir>/memory/<namespace>/).")


@click.group()
def memory() -> None:
    """Add, search and maintain this node's knowledge crystals."""


# --- memories as versioned records in namespaces --------------------------------------------------
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
@click.option("--importance", type=click.FloatRange(0.0, 1.0), default=None,
              help="Stated explicitly: a floor it never decays below (it never expires by decay).")
@click.option("--lifespan", type=click.Choice(LIFESPANS), default=None,
              help="permanent: pinned, never expires by decay (default: decay).")
@common_options
def add(ctx: CliContext, text: str, semantic_type: str, scope: str | None, path: str | None,
        ttl_s: int | None, category: str | None, tags: tuple[str, ...], namespace: str | None,
        importance: float | None, lifespan: str | None) -> None:
    """Store TEXT as a memory in a namespace. Identical text already in that namespace is
    reported (outcome "exists", with any requested field that differs), not stored twice.

    \f
    Example: ``crystalmesh memory add "jonas prefers short answers" --type preference --namespace user:jonas``
    """
    crystal = ctx.client().memory_add(text, semantic_type=semantic_type, scope=scope, path=path,
                                      ttl_ms=ttl_s * 1000 if ttl_s else None, category=category,
                                      tags=tags, namespace=namespace, importance=importance,
                                      lifespan=lifespan)

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
@click.option("--min-relevance", type=click.FloatRange(0.0, 1.0), default=0.0, show_default=True,
              help="Leave out hits whose calibrated relevance (probability of being relevant) is below this.")
@source_option
@common_options
def search(ctx: CliContext, query: str, k: int, types: tuple[str, ...], lifecycles: tuple[str, ...],
           scopes: tuple[str, ...], namespace: str | None, all_namespaces: bool, as_of: datetime | None,
           min_relevance: float, sources: tuple[str, ...]) -> None:
    """Hybrid (dense + BM25) search over the current memories of one namespace; each hit
    says where it came from (session + turn + time, file + lines, skill, or memory).

    Example: crystalmesh memory search "deploy checklist" --source files --min-relevance 0.3
    """
    as_of_ms = None if as_of is None else int(as_of.replace(tzinfo=UTC).timestamp() * 1000)
    hits = ctx.client().memory_search(query, k, types=types, lifecycles=lifecycles, scopes=scopes,
                                      namespace=namespace, all_namespaces=all_namespaces, as_of_ms=as_of_ms,
                                      min_relevance=min_relevance, sources=sources)
    traced = any(h.get("source_id") for h in hits)  # conversation turns: their id in the transcript
    ctx.emit(hits, lambda items: table(
        None, ["#", "score", "rel", "id", "type", "lifecycle", "origin", *(["source"] if traced else []), "text"],
        [[i + 1, f"{h['score']:.4f}", f"{h['relevance']:.2f}", h["id"][:8],
          h["crystal"]["semanticType"] + (" (bought)" if h["crystal"].get("provenance") == "bought" else ""),
          h["crystal"]["lifecycle"], _origin_column(h.get("origin") or {}),
          *([h.get("source_id") or ""] if traced else []), shorten(h["crystal"]["text"])]
         for i, h in enumerate(items)]) if items else click.echo("no matches"))


def _origin_column(origin: dict[str, Any]) -> str:
    """The table's short origin: a file relative to here when it is below, a time in UTC (as `when`)."""
    if origin.get("source") == "file" and origin.get("path"):
        path = Path(str(origin["path"]))
        try:
            origin = origin | {"path": str(path.relative_to(Path.cwd()))}
        except ValueError:
            origin = origin | {"path": str(Path(*path.parts[-3:])) if len(path.parts) > 3 else str(path)}
    at_ms = origin.get("at_ms")
    return origin_label(origin, when(at_ms) if isinstance(at_ms, int) else "")


@memory.command("show")
@click.argument("crystal_id")
@common_options
def show(ctx: CliContext, crystal_id: str) -> None:
    """Show one crystal with its governance, provenance and audit trail."""
    def render(c: dict[str, Any]) -> None:
        governance = c["governance"]
        click.echo(f"id           {c['id']}")
        click.echo(f"type         {c['semanticType']}   origin {c['origin']}   lifecycle {c['lifecycle']}")
        click.echo(f"scope        {governance['accessScope']}   sensitivity {governance['sensitivity']}"
                   f"   lifespan {governance['lifespanPolicy']}")
        floor = governance.get("importanceFloor")
        click.echo(f"importance   {c['importanceScore']:.4f}"
                   + (f" (never below {floor}: said explicitly)" if floor is not None else "")
                   + f"   accesses {c['accessCount']}   last access {when(c['lastAccessedAt'])}")
        click.echo(f"created      {when(c['createdAt'])}   hash {c['hash'][:16]}…")
        click.echo(f"memory       {c.get('memoryId')}  v{c.get('version')}  namespace {c.get('namespace')}"
                   + (f"   superseded by {c['supersededBy']} at {when(c.get('validTo'))}"
                      if c.get("supersededBy") else "")
                   + (f"   expires {when(c['expiresAt'])}" if c.get("expiresAt") else ""))
        if c.get("stableSkillId") or c["semanticType"] in ("skill", "task_pattern"):
            click.echo(f"skill        stable id {c['stableSkillId']}  v{c['skillVersion']}"
                       f"  executions {c['executions']}  successes {c['successes']}")
        if governance.get("peerOrigin"):
            click.echo(f"peer origin  {governance['peerOrigin']}")
        if c.get("provenance") == "bought":
            click.echo(f"bought from  {c['seller']}   (held at the market's confidence until your feedback)")
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
                  [[when(a["at_ms"]), a["action"], a["from_state"], a["to_state"]] for a in c["audit"]])

    ctx.emit(ctx.client().memory_get(crystal_id), render)


@memory.command("list")
@click.option("--namespace", default=None, help=NAMESPACE_HELP)
@click.option("--type", "types", multiple=True, type=click.Choice(TYPES), help="Filter by type.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@common_options
def list_memories(ctx: CliContext, namespace: str | None, types: tuple[str, ...], limit: int) -> None:
    """The newest current memories of a namespace (no deleted, expired or superseded ones)."""
    ctx.emit(ctx.client().memory_list(namespace, types, limit), lambda rows: table(
        None, ["id", "v", "type", "namespace", "created", "text"],
        [[c["id"][:8], c.get("version", 1), c["semanticType"], c.get("namespace"), when(c["createdAt"]),
          shorten(c["text"], 60)] for c in rows]) if rows else click.echo("no memories"))


@memory.command("update")
@click.argument("crystal_id")
@click.argument("text", required=False)
@click.option("--scope", type=click.Choice(SCOPES), default=None, help="New access scope.")
@common_options
def update(ctx: CliContext, crystal_id: str, text: str | None, scope: str | None) -> None:
    """Write a new version of a memory (new TEXT and/or --scope); the old version is closed,
    not deleted, and stays in `memory history`."""
    if text is None and scope is None:
        raise CliError("give the new TEXT, --scope, or both")
    ctx.emit(ctx.client().memory_update(crystal_id, text, scope), lambda c: click.echo(
        f"{c['id']}  version {c.get('version')} of {c.get('memoryId')} (replaces {c.get('previousId')})"))


@memory.command("delete")
@click.argument("crystal_id")
@common_options
def delete(ctx: CliContext, crystal_id: str) -> None:
    """Forget a memory, every version of it: gone from search, show and list at once, physically
    removed by the next consolidation; the deletion stays in `memory history`."""
    ctx.emit(ctx.client().memory_delete(crystal_id),
             lambda d: click.echo(f"deleted {d['memory_id']} ({d['versions']} version(s))"))


@memory.command("pin")
@click.argument("crystal_id")
@common_options
def pin(ctx: CliContext, crystal_id: str) -> None:
    """Keep a memory for good: lifespan permanent, never expired by importance, energy or doubt
    (it goes only when you delete it). Brings back one consolidation expired but did not purge.

    \f
    Example: ``crystalmesh memory pin 3f9c0a1b``
    """
    ctx.emit(ctx.client().memory_set_lifespan(crystal_id, "permanent"), _lifespan_line("pinned"))


@memory.command("unpin")
@click.argument("crystal_id")
@common_options
def unpin(ctx: CliContext, crystal_id: str) -> None:
    """Let a pinned memory decay again like any other (lifespan decay)."""
    ctx.emit(ctx.client().memory_set_lifespan(crystal_id, "decay"), _lifespan_line("unpinned"))


def _lifespan_line(done: str) -> Any:
    def render(c: dict[str, Any]) -> None:
        click.echo(f"{c['id']}  {done}" if c.get("changed") else
                   f"{c['id']}  already {c['governance']['lifespanPolicy']}: nothing changed")
    return render


@memory.command("history")
@click.argument("crystal_id")
@common_options
def history(ctx: CliContext, crystal_id: str) -> None:
    """Every version of a memory and every transition (created, updated, deleted, lifecycle)."""
    def render(d: dict[str, Any]) -> None:
        click.echo(f"memory {d['memory_id']}  namespace {d['namespace']}"
                   + ("  (deleted)" if d.get("deleted") else ""))
        table("versions", ["v", "id", "valid from", "valid to", "scope", "text"],
              [[c.get("version"), c["id"][:8], when(c.get("validFrom")), when(c.get("validTo")),
                c["governance"]["accessScope"], shorten(c["text"], 50)] for c in d["versions"]])
        table("transitions", ["when", "id", "action", "from", "to"],
              [[when(t["at_ms"]), (t.get("crystal_id") or "-")[:8], t["action"], t.get("from_state"),
                t.get("to_state")] for t in d["transitions"]])

    ctx.emit(ctx.client().memory_history(crystal_id), render)


# --- maintenance -------------------------------------------------------------------------------
@memory.command("consolidate")
@click.option("--purge", is_flag=True, help="Also delete expired and archived crystals.")
@click.option("--at", "at", default=None, metavar="DATE|+Nd|+Nh",
              help="Run as of a later time (an ISO date, +90d, +12h): what that much idle time does.")
@click.option("--dry-run", is_flag=True, help="Report what the cycle would do (and forget); write nothing.")
@common_options
def consolidate(ctx: CliContext, purge: bool, at: str | None, dry_run: bool) -> None:
    """Run one consolidation cycle (decay, expiry, merges, facts, tiers; seed 000/003/004).

    \f
    Example: ``crystalmesh memory consolidate --at +90d --dry-run`` (what 90 idle days would forget)
    """
    def render(r: dict[str, Any]) -> None:
        head = "would have" if r.get("dry_run") else "ran"
        click.echo(f"{head} as of {when(r.get('at_ms'))}: scored {r['scored']}, expired {r['expired']} "
                   f"(ttl {r['ttl_expired']}), merged {r['merged']}, purged {r['purged']}")
        forgotten = r.get("forgotten") or []
        if forgotten:
            table("would forget" if r.get("dry_run") else "forgotten", ["id", "type", "reason", "text"],
                  [[f["id"][:8], f.get("type"), f["reason"], shorten(f.get("text") or "", 60)]
                   for f in forgotten])

    ctx.emit(ctx.client().memory_consolidate(purge, at, dry_run), render)


@memory.command("status")
@common_options
def status(ctx: CliContext) -> None:
    """Counts by lifecycle and type, index state, hormones."""
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
        click.echo(f"consolidated {when(s.get('last_consolidation_ms'))}")
        tiers = s.get("tiers") or {}
        if tiers:
            click.echo(f"tiers        policy {tiers['policy']}: "
                       + ", ".join(f"{k} {v}" for k, v in tiers["tiers"].items())
                       + f"   session end {when(tiers.get('last_session_end_ms'))}")

    ctx.emit(ctx.client().memory_status(), render)


@memory.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path), required=False)
@click.option("--type", "semantic_type", type=click.Choice(TYPES), default="general",
              help="Semantic type of plain text lines.")
@click.option("--testament", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Import a signed testament instead (docs/memory.md).")
@common_options
def import_lines(ctx: CliContext, file: Path | None, semantic_type: str, testament: Path | None) -> None:
    """Restore FILE written by `memory export --format jsonl` (same ids, versions, namespaces),
    or add every non-empty line of a plain text FILE as a crystal; or a signed --testament FILE.

    An export is recognised by its first line and judged whole before anything is written: one
    unsound line refuses it. Memories already here are left as they are (importing twice adds
    nothing). Bulk imports run with the node stopped.

    \f
    Example: ``crystalmesh memory import backup.jsonl``
    """
    from node.cli.local import add_lines
    from node.memory import TestamentRefused, import_path, is_export_file, read_testament_file

    if testament is not None:  # verified whole before anything is written (docs/memory.md)
        try:
            data = read_testament_file(testament)
            result = ctx.client().testament_import(base64.b64encode(data).decode("ascii"))
        except TestamentRefused as error:
            raise CliError(str(error)) from error
        return ctx.emit(result, lambda r: click.echo(
            f"imported {r['imported']} of {r['entries']} entries signed by {r['signer']}"
            f" ({r['already_known']} already known)"))
    if file is None:
        raise CliError("memory import needs FILE (or --testament FILE)")
    if ctx.running() is not None:
        raise CliError("a node is running on this data dir; stop it before a bulk import")
    progress = None if ctx.as_json else lambda done, total: stderr(f"imported {done}/{total}")
    if str(file) != "-":
        try:
            export = is_export_file(file)
        except OSError as error:
            raise CliError(f"cannot read {file}: {error.strerror}") from error
        if export:
            with closing(ctx.memory()) as mem:
                restored = import_path(mem, file, progress)
            return ctx.emit(restored, lambda r: click.echo(
                f"restored {r['imported']} crystals of {r['crystals']} ({r['memories']} memories; "
                f"{r['already_stored']} already here, {r['conflicts']} conflicting, left as they were); "
                f"vectors: {r['vectors']}"))
    with click.open_file(str(file), "r", encoding="utf-8", errors="replace") as text:
        lines = [line.strip() for line in text if line.strip()]
    with closing(ctx.memory()) as mem:
        created = add_lines(mem, lines, semantic_type, progress)
    ctx.emit({"lines": len(lines), "created": created},
             lambda r: click.echo(f"{r['created']} new crystals from {r['lines']} lines"))


@memory.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--format", "export_format", type=click.Choice(["jsonl"]), default="jsonl", show_default=True,
              help="The portable format: one JSON line per crystal after a header (docs/memory.md).")
@click.option("--testament", "testament", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a signed testament (at most 2,048 entries) to this file instead.")
@common_options
def export(ctx: CliContext, file: Path | None, export_format: str, testament: Path | None) -> None:
    """Write every current memory with all its versions, namespaces, provenance and vectors to
    FILE (0600: it holds private memories too), for `memory import` on this or another node;
    or a signed --testament of distilled knowledge for a successor.

    \f
    Example: ``crystalmesh memory export --format jsonl backup.jsonl``
    """
    from node.memory import write_private

    if testament is not None and file is not None:
        raise CliError("give FILE or --testament FILE, not both")
    if testament is not None:
        answer = ctx.client().testament_export()
        write_private(testament, base64.b64decode(answer.pop("testament_b64")))
        return ctx.emit(answer | {"path": str(testament)}, lambda r: click.echo(
            f"{r['entries']} entries ({', '.join(f'{k} {v}' for k, v in sorted(r['kinds'].items())) or 'none'}), "
            f"{r['bytes']} bytes, signed by {r['signer']} -> {r['path']}"))
    if file is None:
        raise CliError("memory export needs FILE (or --testament FILE)")
    progress = None if ctx.as_json else lambda done, total: stderr(f"exported {done}/{total}")
    try:
        result = ctx.client().memory_export(str(file), progress=progress)
    except OSError as error:  # the file's folder is missing or not writable
        raise CliError(f"cannot write {file}: {error.strerror}") from error
    ctx.emit(result | {"format": export_format}, lambda r: click.echo(
        f"{r['crystals']} crystals, {r['bytes']} bytes -> {r['path']} (readable by you only)"))


@memory.command("reembed")
@click.option("--embedder", "key", required=True, type=click.Choice(EMBEDDER_NAMES), help="Target embedder.")
@common_options
def reembed(ctx: CliContext, key: str) -> None:
    """Re-embed every crystal with another embedder and rebuild the index (stop the node first).

    The new vectors (and their second opinion's, see memory.second_opinion) are
    computed aside and committed in one transaction; an interrupted run leaves the
    data dir on its old embedder. To the store's own embedder, it writes the
    vectors a store made by an older version lacks.
    """
    from node.memory import reembed as run_reembed

    config = ctx.initialised()
    if ctx.running() is not None:
        raise CliError(f"a node is running on {config.data_dir}; stop it before re-embedding")
    report = run_reembed(config, key, progress=lambda done, total: stderr(f"reembedding {done}/{total}"))
    ctx.emit(asdict(report), lambda data: click.echo(
        f"re-embedded {data['crystals']} crystals: {data['old_embedder']} -> "
        f"{data['new_embedder']} ({data['dim']}-d) in {data['total_s']:.1f} s"
        + (f"; second opinion: {data['second_opinion']}" if data["second_opinion"] else "")))


# --- memory that learns (seed 003/004) -----------------------------------------------------------
@memory.command("feedback")
@click.argument("crystal_id")
@click.argument("verdict", type=click.Choice(["useful", "wrong"]))
@common_options
def feedback(ctx: CliContext, crystal_id: str, verdict: str) -> None:
    """Mark a retrieved crystal useful (confidence up) or wrong (confidence halved)."""
    ctx.emit(ctx.client().memory_feedback(crystal_id, verdict), lambda r: click.echo(
        f"{r['id']}  {r['verdict']}: confidence {r['confidence_before']:.3f} -> {r['confidence']:.3f}"))


@memory.group("session")
def session() -> None:
    """Session boundaries (seed 004 energy tiers)."""


@session.command("end")
@common_options
def session_end(ctx: CliContext) -> None:
    """Mark a session boundary: working memories promote at energy 1.5 instead of 2.0."""
    def render(r: dict[str, Any]) -> None:
        tiers = r.get("tiers")
        if tiers is None:
            click.echo(f"session boundary recorded (policy {r['policy']}: tiers do not move)")
        else:
            click.echo(f"session boundary: {len(tiers['promoted'])} promoted, {len(tiers['expired'])} expired")

    ctx.emit(ctx.client().session_end(), render)


# --- working memory (seed 001) -------------------------------------------------------------------
@memory.command("note")
@click.argument("text")
@click.option("--importance", type=click.FloatRange(0.0, 1.0), default=DEFAULT_IMPORTANCE,
              show_default=True, help="How much this matters, 0-1.")
@click.option("--directive", is_flag=True,
              help="The user stated it as an instruction: it never fades (docs/memory.md).")
@click.option("--lifespan", type=click.Choice(LIFESPANS), default=None,
              help="permanent: also pinned (a note already never decays below its importance).")
@working_namespace
@common_options
def note(ctx: CliContext, text: str, importance: float, directive: bool, namespace: str,
         lifespan: str | None) -> None:
    """Write TEXT to the scratch buffer (durable at once) and make it searchable. What is noted
    was said on purpose: its importance is a floor and it never expires by decay.

    Example: ``crystalmesh memory note "the user never wants semicolons" --directive``
    """
    def render(r: dict[str, Any]) -> None:
        if r["crystal"] == "exists":
            click.echo(f"already remembered as {r['crystal_id']}: " + (
                f"it now never decays below {r['importance']}" if r.get("held") else "nothing written"))
        else:
            click.echo(f"noted {r['id']} at {r['at']} (importance {r['importance']}); crystal "
                       f"{r['crystal']}" + (f" {r['crystal_id']}" if r.get("crystal_id") else ""))

    ctx.emit(ctx.client().memory_note(text, importance, namespace, "directive" if directive else None,
                                      lifespan=lifespan), render)


@memory.command("dream")
@working_namespace
@common_options
def dream(ctx: CliContext, namespace: str) -> None:
    """Run one dream now: rewrite MEMORY.md from the old state, the scratch and new crystals."""
    def render(r: dict[str, Any]) -> None:
        if r["status"] == "written":
            click.echo(f"MEMORY.md written ({r['state_chars']} chars, {r['synthesiser']}): "
                       f"{r['consumed_notes']} scratch notes consumed, {r['new_crystals']} new crystals, "
                       f"{len(r['pointers'])} crystal pointers")
            found = r.get("insights") or {}
            click.echo(f"dream {r.get('dream_count')}: {found.get('created', 0)} new insights, "
                       f"{found.get('sighted', 0)} seen again ({found.get('confirmed', 0)} confirmed), "
                       f"{found.get('proposals', 0)} directive proposals")
            if r.get("reason"):
                click.echo(f"note: {r['reason']}")
        else:
            click.echo(f"{r['status']}: {r['reason']}")

    ctx.emit(ctx.client().memory_dream(namespace), render)


@memory.group("directives")
def directives() -> None:
    """Directives a dream proposed (LLM synthesiser): only the user turns one into a directive."""


@directives.command("list")
@click.option("--status", type=click.Choice(["pending", "adopted", "dismissed", "all"]), default="pending",
              show_default=True)
@working_namespace
@common_options
def directives_list(ctx: CliContext, status: str, namespace: str) -> None:
    """Proposals waiting for the user (or decided ones).

    Example: ``crystalmesh memory directives list``
    """
    def render(r: dict[str, Any]) -> None:
        table("directive proposals", ["id", "status", "proposed", "text"],
              [[p["id"], p["status"], when(p["proposed_at_ms"]), shorten(p["text"], 80)]
               for p in r["proposals"]])

    ctx.emit(ctx.client().directive_proposals(namespace, status), render)


def _decide(ctx: CliContext, proposal_id: str, adopt: bool, namespace: str) -> None:
    def render(r: dict[str, Any]) -> None:
        if r["status"] == "adopted":
            click.echo(f"adopted as directive {r['crystal_id']}: {r['text']}")
        else:
            click.echo(f"dismissed: {r['text']}")

    ctx.emit(ctx.client().decide_directive(proposal_id, adopt, namespace), render)


@directives.command("confirm")
@click.argument("proposal_id")
@working_namespace
@common_options
def directives_confirm(ctx: CliContext, proposal_id: str, namespace: str) -> None:
    """Adopt a proposal: it is written as ``memory note --directive`` writes it.

    Example: ``crystalmesh memory directives confirm 3f9c0a1b2c3d4e5f``
    """
    _decide(ctx, proposal_id, True, namespace)


@directives.command("dismiss")
@click.argument("proposal_id")
@working_namespace
@common_options
def directives_dismiss(ctx: CliContext, proposal_id: str, namespace: str) -> None:
    """Dismiss a proposal: nothing is written but the decision."""
    _decide(ctx, proposal_id, False, namespace)


def _render_budgeted(result: dict[str, Any]) -> None:
    click.echo(result["text"])
    click.echo(f"\n-- {result['used_tokens']}/{result['budget_tokens']} tokens", err=True)
    if result["evicted"]:
        table("evicted", ["id", "kind", "reason", "tokens"],
              [[e["id"][:8], e["kind"], e["reason"], e["tokens"]] for e in result["evicted"]])


@memory.command("context")
@click.option("--query", default=None, help="Assemble typed blocks for this query (needs --budget-tokens).")
@click.option("--budget-tokens", "budget_tokens", type=click.IntRange(0, 1_000_000), default=None,
              help="Token budget: warnings, facts, episodes, skills and working memory within it.")
@click.option("--window", "window_tokens", type=click.IntRange(1, 10_000_000),
              default=DEFAULT_WINDOW_TOKENS, show_default=True,
              help="The model's context window in tokens (sizes the working memory).")
@working_namespace
@source_option
@common_options
def context(ctx: CliContext, query: str | None, budget_tokens: int | None, window_tokens: int,
            namespace: str, sources: tuple[str, ...]) -> None:
    """Print MEMORY.md and the pending scratch notes, sized for a system prompt.

    \f
    Example (seed 003's typed blocks): ``crystalmesh memory context --query "deploy" --budget-tokens 2000``
    """
    if query is None and budget_tokens is None:
        if sources:
            raise CliError("--source chooses what a --query searches: give --query and --budget-tokens too")
        result = ctx.client().memory_context(window_tokens, namespace)
        return ctx.emit(result, lambda r: click.echo(r["context"], nl=False))
    if query is None or budget_tokens is None:
        raise CliError("the budgeted context needs both --query and --budget-tokens")
    client = ctx.client()
    working = str(client.memory_context(window_tokens, namespace).get("context") or "")
    ctx.emit(client.budget_context(query, budget_tokens, working, sources=sources), _render_budgeted)


# --- conversations (docs/memory.md, "Conversations") ---------------------------------------------
@memory.command("ingest")
@click.option("--conversation", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A conversation file: JSON or JSONL turns (speaker, text, time, session, id) or LoCoMo's shape.")
@click.option("--transcript", "transcript", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A session transcript: Claude Code session JSONL, Codex CLI rollout JSONL or "
                   "{role, content, timestamp} lines; read from where the last ingest of it stopped.")
@click.option("--format", "transcript_format", type=click.Choice(["claude-code", "codex", "messages"]),
              default=None, help="The transcript's format (default: detected from its lines).")
@click.option("--namespace", default=None, help=NAMESPACE_HELP)
@click.option("--type", "semantic_type", type=click.Choice(TYPES), default="general", show_default=True,
              help="Semantic type of a conversation's memories.")
@common_options
def ingest(ctx: CliContext, path: Path | None, transcript: Path | None, transcript_format: str | None,
           namespace: str | None, semantic_type: str) -> None:
    """Store a conversation's turns, or a session transcript's new messages, as memories.

    A conversation (--conversation) is checked whole first (shape, size, nesting, text): a
    refused file stores nothing, and ingesting the same file again adds nothing. A transcript
    (--transcript) is streamed: user and assistant text, each tool call as one line and its
    result shortened are kept, thinking and bookkeeping dropped, secrets redacted, hostile lines
    skipped with a count; a transcript that has grown adds only its new messages.

    \f
    Examples: ``crystalmesh memory ingest --conversation chat.jsonl --namespace user:jonas``;
    ``crystalmesh memory ingest --transcript ~/.claude/projects/-home-me-app/<session>.jsonl``
    """
    if (path is None) == (transcript is None):
        raise CliError("give one of --conversation FILE or --transcript FILE")
    if transcript is not None:
        return _ingest_transcript(ctx, transcript, transcript_format, namespace)
    if transcript_format is not None:
        raise CliError("--format is for --transcript")
    assert path is not None
    from node.api import ApiError
    from node.memory import MAX_CONVERSATION_BYTES

    with path.open("rb") as file:
        data = file.read(MAX_CONVERSATION_BYTES + 1)  # a bigger file is refused without reading it all
    client = ctx.client()
    progress = None if ctx.as_json else lambda done, total: stderr(f"embedded {done}/{total} turns")
    try:
        result = client.memory_ingest_conversation(base64.b64encode(data).decode("ascii"), namespace=namespace,
                                                   semantic_type=semantic_type, progress=progress)
    except ApiError as error:
        if error.status == 413:
            raise CliError(f"{path} is too big to send to the running node; stop it and ingest again "
                           "(the file is then read here)") from error
        raise
    ctx.emit(result, lambda r: click.echo(
        f"{r['added']} turns added, {r['already_stored']} already stored, of {r['turns']} "
        f"({r['sessions']} sessions; {', '.join(r['speakers'])}) in {r['total_s']:.1f} s"
        + (f" ({r['turns_per_s']:.0f} turns/s)" if r.get("turns_per_s") else "")))


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items())) or "none"


def transcript_summary(report: dict[str, Any]) -> str:
    """The one line ``memory ingest --transcript`` prints (the hooks print it to their log too)."""
    return (f"{report['added']} messages added, {report['already_stored']} already stored, "
            f"of {report['messages_read']} read from {report['bytes_read']} bytes "
            f"(session {report.get('session_id') or '?'}, {report.get('format') or 'format unknown'}"
            + (f", {report['sidechain_turns']} from subagents" if report.get("sidechain_turns") else "")
            + f"); skipped: {_counts(report.get('skipped') or {})}; "
            f"redacted: {_counts(report.get('redacted') or {})}; offset {report['offset']}")


def _ingest_transcript(ctx: CliContext, transcript: Path, transcript_format: str | None,
                       namespace: str | None) -> None:
    def progress(done: int, total: int) -> None:
        stderr(f"read {done}/{total} bytes")

    result = ctx.client().memory_ingest_transcript(str(transcript), format=transcript_format, namespace=namespace,
                                                   progress=None if ctx.as_json else progress)
    ctx.emit(result, lambda r: click.echo(transcript_summary(r)))
# --- files (docs/memory.md, "Files") -------------------------------------------------------------
@memory.command("index")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--namespace", default=None, help=NAMESPACE_HELP)
@click.option("--watch", is_flag=True, help="Keep going: re-sync every --interval seconds until Ctrl-C.")
@click.option("--interval", "interval_s", type=click.FloatRange(0.2, 3600), default=2.0, show_default=True,
              help="Seconds between re-syncs with --watch.")
@common_options
def index(ctx: CliContext, paths: tuple[Path, ...], namespace: str | None, watch: bool, interval_s: float) -> None:
    """Index files and folders as memories, chunked by structure with path and lines; run it
    again to re-sync (unchanged chunks stay, changed ones become versions, removed ones retire).

    Skips .gitignored, hidden, binary and oversize files, symlinks and the node's data dir.
    With a node running, the files are read here and sent to it.

    \f
    Example: ``crystalmesh memory index ~/notes CLAUDE.md --watch``
    """
    import signal
    import threading

    config = ctx.initialised()
    client = ctx.client()

    def sync() -> dict[str, Any]:
        return client.memory_index([str(path) for path in paths], namespace=namespace,
                                   max_file_bytes=config.memory.index_max_file_bytes,
                                   exclude=(str(config.data_dir),), progress=None if ctx.as_json else stderr)

    if not watch:
        return ctx.emit(sync(), _render_index)
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())  # finish the sync under way, then stop
    try:
        ctx.emit(sync(), _render_index)
        while not stop.wait(interval_s):
            summary = sync()
            chunks = summary["chunks"]
            if chunks["added"] or chunks["versioned"] or chunks["retired"]:
                ctx.emit(summary, _render_index)
    finally:
        signal.signal(signal.SIGINT, previous)
    stderr("stopped")


def _render_index(summary: dict[str, Any]) -> None:
    files, chunks = summary["files"], summary["chunks"]
    skipped = ", ".join(f"{count} {reason}" for reason, count in files["skipped"].items()) or "none"
    click.echo(f"files: {files['seen']} seen, {files['indexed']} indexed, {files['unchanged']} unchanged, "
               f"{files['removed']} removed; skipped: {skipped}")
    click.echo(f"chunks: {chunks['added']} added, {chunks['versioned']} versioned, {chunks['unchanged']} "
               f"unchanged ({chunks['relocated']} moved), {chunks['retired']} retired "
               f"in {summary['seconds']:.2f} s (namespace {summary['namespace']})")


@memory.command("neighbours")
@click.argument("crystal_id")
@click.option("--window", type=click.IntRange(0, 20), default=2, show_default=True,
              help="Turns either side of the hit.")
@common_options
def neighbours(ctx: CliContext, crystal_id: str, window: int) -> None:
    """The turns of the same session around a conversation turn (an id from `memory search`)."""
    ctx.emit(ctx.client().memory_neighbours(crystal_id, window), lambda r: table(
        f"session {r['session']} of {r['conversation'][:24]}", ["", "source", "id", "text"],
        [[">" if t["hit"] else "", t["source_id"], t["id"][:8], shorten(t["text"], 90)] for t in r["turns"]]))


@memory.command("watch")
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False))
@click.option("--once", is_flag=True, help="One pass, then exit.")
@click.option("--interval", default="5s", show_default=True, help="Time between passes (90s, 5m).")
@click.option("--namespace", default=None, help=NAMESPACE_HELP)
@common_options
def watch(ctx: CliContext, folders: tuple[Path, ...], once: bool, interval: str, namespace: str | None) -> None:
    """Follow folders of transcripts (Claude Code's ~/.claude/projects, Codex's ~/.codex/sessions)
    for hosts without hooks: every *.jsonl that grew is ingested, only its new messages.

    \f
    Example: ``crystalmesh memory watch ~/.claude/projects ~/.codex/sessions``
    """
    import time

    from node.capture import TranscriptWatcher
    from node.cli.context import parse_duration

    seconds = parse_duration(interval)
    watcher = TranscriptWatcher(list(folders), ctx.resolve_data_dir(), namespace)
    client = ctx.client()
    while True:
        report = watcher.run_pass(client)
        if once:
            ctx.emit(report.to_dict(), lambda r: click.echo(
                f"{r['files']} transcripts, {r['ingested']} ingested ({r['added']} new turns), {r['failed']} failed"))
            return
        if report.ingested or report.failed:
            stderr(f"watch: {report.ingested} ingested ({report.added} new turns), {report.failed} failed")
        time.sleep(seconds)

"""``crystalmesh memory list|update|delete|history``: memories as versioned records in namespaces.

Like the rest of ``memory``, they go through the running node's API when there is
one (it owns the index), and open the store directly otherwise.
"""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, table
from node.cli.memory import SCOPES, TYPES, _short, _when, memory, open_memory

NAMESPACE_HELP = "Namespace (default: default), e.g. user:jonas, agent:planner, session:42."


@memory.command("list")
@click.option("--namespace", default=None, help=NAMESPACE_HELP)
@click.option("--type", "types", multiple=True, type=click.Choice(TYPES), help="Filter by type.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@common_options
def list_memories(ctx: CliContext, namespace: str | None, types: tuple[str, ...], limit: int) -> None:
    """The newest current memories of a namespace (no deleted, expired or superseded ones)."""
    client = ctx.running()
    if client is not None:
        items = client.get("/v1/crystals", namespace=namespace, type=list(types) or None,
                           limit=limit)["crystals"]
    else:
        from node.memory.versions import list_memories as listed

        with open_memory(ctx) as mem:
            items = [c.to_dict() for c in listed(mem, namespace, types, limit)]
    ctx.emit(items, lambda rows: table(
        None, ["id", "v", "type", "namespace", "created", "text"],
        [[c["id"][:8], c.get("version", 1), c["semanticType"], c.get("namespace"), _when(c["createdAt"]),
          _short(c["text"], 60)] for c in rows]) if rows else click.echo("no memories"))


@memory.command("update")
@click.argument("crystal_id")
@click.argument("text", required=False)
@click.option("--scope", type=click.Choice(SCOPES), default=None, help="New access scope.")
@common_options
def update(ctx: CliContext, crystal_id: str, text: str | None, scope: str | None) -> None:
    """Write a new version of a memory (new TEXT and/or --scope); the old version is closed,
    not deleted, and stays in `memory history`."""
    body = {key: value for key, value in (("text", text), ("scope", scope)) if value is not None}
    if not body:
        raise CliError("give the new TEXT, --scope, or both")
    client = ctx.running()
    if client is not None:
        data = client.request("PATCH", f"/v1/crystals/{crystal_id}", json=body)
    else:
        from node.memory.versions import update_from_request

        with open_memory(ctx) as mem:
            data = update_from_request(mem, crystal_id, body)
    ctx.emit(data, lambda c: click.echo(
        f"{c['id']}  version {c.get('version')} of {c.get('memoryId')} (replaces {c.get('previousId')})"))


@memory.command("delete")
@click.argument("crystal_id")
@common_options
def delete(ctx: CliContext, crystal_id: str) -> None:
    """Forget a memory, every version of it: gone from search, show and list at once, physically
    removed by the next consolidation; the deletion stays in `memory history`."""
    client = ctx.running()
    if client is not None:
        data = client.request("DELETE", f"/v1/crystals/{crystal_id}")
    else:
        from node.memory.versions import delete as deleted

        with open_memory(ctx) as mem:
            data = deleted(mem, crystal_id)
    ctx.emit(data, lambda d: click.echo(f"deleted {d['memory_id']} ({d['versions']} version(s))"))


@memory.command("history")
@click.argument("crystal_id")
@common_options
def history(ctx: CliContext, crystal_id: str) -> None:
    """Every version of a memory and every transition (created, updated, deleted, lifecycle)."""
    client = ctx.running()
    if client is not None:
        data = client.get(f"/v1/crystals/{crystal_id}/history")
    else:
        from node.memory.versions import history as read_history

        with open_memory(ctx) as mem:
            data = read_history(mem, crystal_id)

    def render(d: dict[str, Any]) -> None:
        click.echo(f"memory {d['memory_id']}  namespace {d['namespace']}"
                   + ("  (deleted)" if d.get("deleted") else ""))
        table("versions", ["v", "id", "valid from", "valid to", "scope", "text"],
              [[c.get("version"), c["id"][:8], _when(c.get("validFrom")), _when(c.get("validTo")),
                c["governance"]["accessScope"], _short(c["text"], 50)] for c in d["versions"]])
        table("transitions", ["when", "id", "action", "from", "to"],
              [[_when(t["at_ms"]), (t.get("crystal_id") or "-")[:8], t["action"], t.get("from_state"),
                t.get("to_state")] for t in d["transitions"]])

    ctx.emit(data, render)

"""``crystalmesh trust ...``: what this node believes about its peers."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, common_options, table


@click.group()
def trust() -> None:
    """Peer trust (EigenTrust over signed reports) and the ingestion gate."""


def _score(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


@trust.command("show")
@common_options
def trust_show(ctx: CliContext) -> None:
    """Every peer this node has evidence about: local, global, level, last reason."""
    ctx.emit(ctx.api().trust_rows(), lambda items: table(
        None, ["peer", "local", "global", "reputation", "level", "last reason"],
        [[r["peer_id"][:20] + "…", _score(r["local"]), _score(r["global"]), _score(r["reputation"]),
          r["level"], r.get("last_reason") or "-"] for r in items]) if items
        else click.echo("no evidence about any peer yet"))


@trust.command("ban")
@click.argument("peer")
@click.option("--reason", default="", help="Why (kept in the audit log).")
@common_options
def trust_ban(ctx: CliContext, peer: str, reason: str) -> None:
    """Ban PEER (peer id or hex public key) now: nothing from it is ingested, it is cut off
    from the mesh, until `crystalmesh trust unban PEER`.

    \f
    Example: ``crystalmesh trust ban 12D3KooW... --reason "sold a credential stealer"``
    """
    ctx.emit(ctx.api().trust_ban(peer, reason), lambda d: click.echo(
        f"banned {d['peer_id']} (level {d.get('level', 'banned')})"))


@trust.command("unban")
@click.argument("peer")
@click.option("--reason", default="", help="Why (kept in the audit log).")
@common_options
def trust_unban(ctx: CliContext, peer: str, reason: str) -> None:
    """Lift a ban on PEER (manual or earned by offences); its offences are forgiven."""
    ctx.emit(ctx.api().trust_unban(peer, reason), lambda d: click.echo(
        f"unbanned {d['peer_id']} (level {d.get('level', '-')})"))

"""``crystalmesh`` itself: the root group (which node a command addresses) and the node's own
commands: ``init``, ``run``, ``status``, ``peers``, ``dashboard``, ``purchases``, ``sales``,
``doctor``, ``backup``, ``restore`` (what these three ask and print: ``node.cli.ops``).

Every other command lives in its group's file (``memory``, ``skill``, ``market``, ...);
``node.cli.main`` adds those groups to this root and runs it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options, table, usdc, when
from node.cli.ops import live_findings, passphrase, progress, render_doctor
from node.cli.weather import describe_weather


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Node data dir (default ~/.crystalmesh/default, or $CRYSTALMESH_DATA_DIR).")
@click.option("--node", "node_name", default=None,
              help="Address a devnet node by name (most recent devnet, or --dir).")
@click.option("--dir", "devnet_dir", type=click.Path(path_type=Path), default=None,
              help="Devnet dir used with --node.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(package_name="crystalmesh")
@click.pass_context
def cli(
    ctx: click.Context,
    data_dir: Path | None,
    node_name: str | None,
    devnet_dir: Path | None,
    as_json: bool,
    debug: bool,
) -> None:
    """crystalmesh: a peer-to-peer node for AI-agent memory and a USDC skill marketplace."""
    ctx.obj = CliContext(data_dir, node_name, devnet_dir, as_json, debug)
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


@cli.command()
@click.option("--name", default=None, help="Node name (default: the data dir's name).")
@click.option("--embedder", type=click.Choice(["minilm", "mpnet", "hashing"]), default=None,
              help="Embedding model (minilm, the semantic default; mpnet, opt-in after "
              "scripts/setup --mpnet; hashing only for tests).")
@click.option("--listen", default=None, help="libp2p listen multiaddr.")
@click.option("--api-port", type=int, default=None, help="Local API port (0: any free port).")
@click.option("--bootstrap", multiple=True, help="Bootstrap peer multiaddr (repeatable).")
@click.option("--management-key", multiple=True, help="Management Ed25519 key, hex (repeatable).")
@common_options
def init(
    ctx: CliContext,
    name: str | None,
    embedder: str | None,
    listen: str | None,
    api_port: int | None,
    bootstrap: tuple[str, ...],
    management_key: tuple[str, ...],
) -> None:
    """Create a node's data dir: node.toml, identity key, wallet key, API token.

    \f
    Example: ``crystalmesh --data-dir ~/.crystalmesh/alice init --name alice --api-port 0``
    """
    from node.init import init_node

    summary = init_node(
        ctx.resolve_data_dir(),
        name=name,
        embedder=embedder,
        listen=listen,
        api_port=api_port,
        bootstrap=list(bootstrap) or None,
        management_keys=list(management_key) or None,
    )
    ctx.emit(
        summary,
        lambda s: click.echo(
            f"{'initialised' if s['created'] else 'already initialised'}: {s['data_dir']}\n"
            f"  peer id      {s['peer_id']}\n  public key   {s['public_key']}\n"
            f"  wallet       {s['wallet_address']}\n  embedder     {s['embedder']}"
        ),
    )


@cli.command()
@common_options
def run(ctx: CliContext) -> None:
    """Run this node in the foreground (Ctrl-C stops it gracefully)."""
    import trio

    from node.logs import setup_logging
    from node.service import NodeService

    config = ctx.config()
    if not config.identity_path.exists():
        raise CliError(f"{config.data_dir} is not initialised; run `crystalmesh init` first")
    if ctx.running() is not None:
        raise CliError(f"a node is already running on {config.data_dir}")
    setup_logging(config, debug=ctx.debug)
    trio.run(NodeService(config).run)


@cli.command()
@common_options
def status(ctx: CliContext) -> None:
    """Status of the running node: peer id, peers, listings, weather."""

    def render(s: dict[str, Any]) -> None:
        click.echo(f"node         {s['name']}{'  (management)' if s['management'] else ''}")
        click.echo(f"peer id      {s['peer_id']}")
        click.echo(f"listen       {', '.join(s['listen_addrs'])}")
        click.echo(f"api          http://127.0.0.1:{s['api_port']}")
        if s.get("x402_url"):
            click.echo(f"x402         {s['x402_url']}/x402/skills  (public, unauthenticated)")
        click.echo(f"peers        {s['connected_peers']} connected")
        click.echo(f"listings     {s['listings_known']} known")
        click.echo(f"crystals     {s['crystals']}")
        click.echo(f"wallet       {s['wallet_address']}")
        click.echo(f"weather      {describe_weather(s['weather'])}")
        damaged = {name: health for name, health in s.get("stores", {}).items() if health != "ok"}
        click.echo("stores       " + ("ok" if not damaged else "; ".join(
            f"{name} {health} (writes stopped; see `crystalmesh doctor`)" for name, health in damaged.items())))

    ctx.emit(ctx.api().status(), render)


@cli.command()
@common_options
def peers(ctx: CliContext) -> None:
    """Peers of the running node."""
    ctx.emit(ctx.api().peers(), lambda items: table(
        None, ["peer id", "connected", "score", "addrs"],
        [[p["peer_id"], p["connected"], f"{p.get('score', 0):.2f}", " ".join(p.get("addrs", [])[:1])]
         for p in items]))


@cli.command()
@common_options
def dashboard(ctx: CliContext) -> None:
    """Print a one-time login URL for this node's web dashboard (works once, within 60 s)."""
    client = ctx.api()
    url = client.base_url + client.dashboard_login_link()["path"]
    ctx.emit({"url": url, "dashboard": f"{client.base_url}/dashboard"}, lambda d: click.echo(d["url"]))


@cli.command()
@click.option("--limit", type=int, default=50, show_default=True)
@common_options
def purchases(ctx: CliContext, limit: int) -> None:
    """Skills this node bought (or tried to)."""
    ctx.emit(ctx.api().purchases(limit), lambda rows: table(
        None, ["when", "listing", "name", "price", "state", "tx", "crystal"],
        [[when(r["created_at_ms"], "%m-%d %H:%M:%S"), r["listing_id"][:12], r["name"][:30],
          usdc(r["price_micro_usdc"]), r["state"], (r["tx_hash"] or "-")[:12],
          (r["crystal_id"] or "-")[:8]] for r in rows]) if rows else click.echo("no purchases"))


@cli.command()
@click.option("--limit", type=int, default=50, show_default=True)
@common_options
def sales(ctx: CliContext, limit: int) -> None:
    """Skills this node sold."""
    ctx.emit(ctx.api().sales(limit), lambda rows: table(
        None, ["when", "listing", "buyer", "price", "state", "tx"],
        [[when(r["created_at_ms"], "%m-%d %H:%M:%S"), r["listing_id"][:12], r["buyer_key"][:10],
          usdc(r["price_micro_usdc"]), r["state"], (r["tx_hash"] or "-")[:12]] for r in rows])
        if rows else click.echo("no sales"))


@cli.command()
@click.option("--limit", type=int, default=50, show_default=True)
@common_options
def audit(ctx: CliContext, limit: int) -> None:
    """The operator's acts (weather lifts, bans and unbans, revoked endorsements), oldest first."""
    ctx.emit(ctx.api().audit(limit), lambda rows: table(
        None, ["when", "action", "target", "detail"],
        [[when(r["at_ms"], "%m-%d %H:%M:%S"), r["action"], str(r["target"])[:24],
          " ".join(f"{k}={v}" for k, v in sorted(r.get("detail", {}).items()))[:80]] for r in rows])
        if rows else click.echo("no operator acts yet"))


@cli.command()
@click.option("--full", is_flag=True, help="integrity_check instead of quick_check (reads every index too).")
@click.option("--repair", is_flag=True,
              help="Salvage each damaged database into a new file (the node must be stopped).")
@common_options
def doctor(ctx: CliContext, full: bool, repair: bool) -> None:
    """Check a data dir: databases, write-ahead logs, index, keys and their modes, node.toml,
    working memory; and, if the node runs, its chain, peers and reachability.

    Exit code 1 (and one ``error:`` line after the report) when a line fails. With ``--repair`` (node stopped) each damaged database is
    salvaged, the damaged file kept beside it, the index rebuilt, and the rows before and
    after are shown per table.

    \f
    Example: ``crystalmesh --data-dir ~/.crystalmesh/alice doctor --json``
    """
    from node.ops import FAIL, examine
    from node.ops import repair as repair_findings

    data_dir = ctx.resolve_data_dir()
    if not data_dir.is_dir():
        raise CliError(f"{data_dir} is not a directory")
    findings = [finding.to_dict() for finding in examine(data_dir, full=full)]
    client = ctx.running() if (data_dir / "node.toml").exists() else None
    if repair:
        if client is not None:
            raise CliError(f"a node is running on {data_dir}; stop it before `doctor --repair`")
        repaired = repair_findings(ctx.config(), examine(data_dir, full=full))
        findings = [f.to_dict() for f in examine(data_dir, full=full)] + [
            {**f.to_dict(), "check": f"repaired {f.check}"} for f in repaired]
    elif client is not None:
        findings += live_findings(client)
    ctx.emit({"data_dir": str(data_dir), "findings": findings,
              "verdict": "fail" if any(f["verdict"] == FAIL for f in findings) else "ok"}, render_doctor)
    failed = [f["check"] for f in findings if f["verdict"] == FAIL]
    if failed:
        raise CliError(f"{len(failed)} check(s) failed: {', '.join(failed)}"
                       + ("" if repair else "; see above (`doctor --repair` salvages a damaged database)"))


@cli.command()
@click.option("--to", "to", required=True, type=click.Path(dir_okay=False), help="The backup file to write.")
@click.option("--passphrase-env", default=None, metavar="VAR",
              help="Read the passphrase from this environment variable (default: ask on the terminal).")
@common_options
def backup(ctx: CliContext, to: str, passphrase_env: str | None) -> None:
    """Back up this node, running or not, into one encrypted file: every database (SQLite's
    online backup), the keys, node.toml and working memory.

    The file is written beside its final name and renamed over it when complete: a kill
    leaves the previous backup as it was.

    \f
    Example: ``CM_PASS=... crystalmesh backup --to ~/alice.cmbackup --passphrase-env CM_PASS``
    """
    from pathlib import Path

    from node.keys import load_identity
    from node.ops import take_backup

    config = ctx.initialised()
    secret = passphrase(passphrase_env, confirm=True)
    peer_id = load_identity(config).peer_id
    say = progress("backup", ctx)
    ctx.emit(take_backup(config.data_dir, Path(to), secret, say, peer_id=peer_id),
             lambda s: click.echo(f"backed up {len(s['files'])} files of {s['peer_id']} to {s['file']}"))


@cli.command()
@click.argument("archive", type=click.Path(dir_okay=False))
@click.option("--passphrase-env", default=None, metavar="VAR",
              help="Read the passphrase from this environment variable (default: ask on the terminal).")
@common_options
def restore(ctx: CliContext, archive: str, passphrase_env: str | None) -> None:
    """Restore a backup into a new data dir (``--data-dir D``, absent or empty): the same
    peer id, wallet, memories and ledger. A tampered, truncated or wrongly-unlocked file is
    refused and nothing is written.

    \f
    Example: ``crystalmesh restore ~/alice.cmbackup --data-dir ~/.crystalmesh/alice``
    """
    from pathlib import Path

    from node.ops import restore_backup

    target = ctx.resolve_data_dir()
    secret = passphrase(passphrase_env, confirm=False)
    say = progress("restore", ctx)
    ctx.emit(restore_backup(Path(archive), target, secret, say),
             lambda s: click.echo(f"restored {s['peer_id']} into {s['data_dir']} "
                                  f"({len(s['files'])} files; the index is rebuilt on first start)"))

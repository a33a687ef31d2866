"""``crystalmesh doctor``, ``backup`` and ``restore``: a node you can check, back up and
restore (issue 30; docs/operations.md, "Doctor", "Backup and restore")."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, CliError, common_options


@click.command()
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
        findings += _live(client)
    ctx.emit({"data_dir": str(data_dir), "findings": findings,
              "verdict": "fail" if any(f["verdict"] == FAIL for f in findings) else "ok"}, _render)
    failed = [f["check"] for f in findings if f["verdict"] == FAIL]
    if failed:
        raise CliError(f"{len(failed)} check(s) failed: {', '.join(failed)}"
                       + ("" if repair else "; see above (`doctor --repair` salvages a damaged database)"))


def _live(client: Any) -> list[dict[str, Any]]:
    """What the running node says about itself: stores, peers, reachability, chain."""
    try:
        status = client.status()
    except Exception as exc:  # the API is the one way in: any failure is the finding
        return [{"check": "node", "verdict": "fail", "detail": f"running but its API fails: {exc}"}]
    findings = [{"check": f"running {name}", "verdict": "ok" if health == "ok" else "fail",
                 "detail": health} for name, health in status.get("stores", {}).items()]
    peers = int(status.get("connected_peers", 0))
    findings.append({"check": "peers", "verdict": "ok" if peers else "warn", "detail": f"{peers} connected"})
    reach = status.get("reachability") or {}
    verdict = reach.get("status", "unknown") if isinstance(reach, dict) else str(reach)
    findings.append({"check": "reachability", "verdict": "ok" if verdict != "unknown" else "warn",
                     "detail": f"AutoNAT: {verdict}"})
    try:
        wallet = client.wallet()
        chain_ok = wallet.get("usdc_micro") is not None and "error" not in wallet
        detail = (f"reachable; wallet holds {wallet['usdc_micro']} micro-USDC" if chain_ok
                  else f"unreachable ({wallet.get('error', 'no chain configured')})")
    except Exception as exc:
        chain_ok, detail = False, f"unreachable ({exc})"
    findings.append({"check": "chain", "verdict": "ok" if chain_ok else "warn", "detail": detail})
    return findings


def _render(report: dict[str, Any]) -> None:
    for finding in report["findings"]:
        click.echo(f"{finding['verdict']:<5} {finding['check']:<22} {finding['detail']}")
        for table in finding.get("repair", []):
            if table["lost"] != 0 or table["unreadable"]:
                before = "?" if table["before"] is None else table["before"]
                click.echo(f"{'':28}{table['table']}: {before} rows before, {table['after']} after"
                           + (f"; unreadable {', '.join(table['unreadable'])}" if table["unreadable"] else ""))


def _passphrase(variable: str | None, *, confirm: bool) -> bytes:
    """From the environment variable named by ``--passphrase-env``, or asked on a terminal."""
    import os
    import sys

    if variable:
        value = os.environ.get(variable, "")
        if not value:
            raise CliError(f"--passphrase-env {variable}: that environment variable is empty or unset")
        return value.encode()
    if not sys.stdin.isatty():
        raise CliError("no passphrase: run on a terminal, or name an environment variable "
                       "with --passphrase-env VAR")
    value = click.prompt("passphrase", hide_input=True, confirmation_prompt=confirm, err=True)
    return str(value).encode()


def _progress(command: str, ctx: CliContext) -> Any:
    """Progress lines on a terminal's stderr; none for scripts (a failure stays one line)."""
    import sys

    if ctx.as_json or not sys.stderr.isatty():
        return lambda _: None
    return lambda line: click.echo(f"{command}: {line}", err=True)


@click.command()
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
    secret = _passphrase(passphrase_env, confirm=True)
    peer_id = load_identity(config).peer_id
    say = _progress("backup", ctx)
    ctx.emit(take_backup(config.data_dir, Path(to), secret, say, peer_id=peer_id),
             lambda s: click.echo(f"backed up {len(s['files'])} files of {s['peer_id']} to {s['file']}"))


@click.command()
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
    secret = _passphrase(passphrase_env, confirm=False)
    say = _progress("restore", ctx)
    ctx.emit(restore_backup(Path(archive), target, secret, say),
             lambda s: click.echo(f"restored {s['peer_id']} into {s['data_dir']} "
                                  f"({len(s['files'])} files; the index is rebuilt on first start)"))

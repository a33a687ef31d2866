"""What ``crystalmesh doctor``, ``backup`` and ``restore`` (root commands, in ``node.cli.node``)
ask and print: a node you can check, back up and restore (issue 30; docs/operations.md,
"Doctor", "Backup and restore")."""

from __future__ import annotations

from typing import Any

import click

from node.cli.context import CliContext, CliError


def live_findings(client: Any) -> list[dict[str, Any]]:
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


def render_doctor(report: dict[str, Any]) -> None:
    for finding in report["findings"]:
        click.echo(f"{finding['verdict']:<5} {finding['check']:<22} {finding['detail']}")
        for table in finding.get("repair", []):
            if table["lost"] != 0 or table["unreadable"]:
                before = "?" if table["before"] is None else table["before"]
                click.echo(f"{'':28}{table['table']}: {before} rows before, {table['after']} after"
                           + (f"; unreadable {', '.join(table['unreadable'])}" if table["unreadable"] else ""))


def passphrase(variable: str | None, *, confirm: bool) -> bytes:
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


def progress(command: str, ctx: CliContext) -> Any:
    """Progress lines on a terminal's stderr; none for scripts (a failure stays one line)."""
    import sys

    if ctx.as_json or not sys.stderr.isatty():
        return lambda _: None
    return lambda line: click.echo(f"{command}: {line}", err=True)

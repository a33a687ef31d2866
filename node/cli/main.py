"""The ``crystalmesh`` command."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path

import click

from node.cli.context import CliContext, CliError, common_options
from node.errors import CrystalmeshError


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
    """Create a node's data dir: node.toml, identity key, wallet key, API token."""
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


def _register_commands() -> None:
    from node.cli import (
        agent,
        bounty,
        devnet,
        market,
        memory,
        models,
        network,
        operate,
        skill,
        trade,
        trust,
        wallet,
        weather,
    )

    cli.add_command(bounty.bounty)
    cli.add_command(devnet.devnet)
    cli.add_command(memory.memory)
    cli.add_command(market.market)
    cli.add_command(models.models)
    cli.add_command(skill.skill)
    cli.add_command(trust.trust)
    cli.add_command(wallet.wallet)
    cli.add_command(weather.weather)
    for command in network.COMMANDS + trade.COMMANDS + operate.COMMANDS + agent.COMMANDS:
        cli.add_command(command)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Entry point: user mistakes become one line on stderr and exit code 1."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args or bool(os.environ.get("CRYSTALMESH_DEBUG"))
    try:
        cli.main(args=args, prog_name="crystalmesh", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except CliError as exc:
        exc.show()
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if debug:
            traceback.print_exc()
        message = str(exc) or type(exc).__name__
        click.echo(f"error: {message}", err=True)
        if not debug and not _is_user_error(exc):
            click.echo("(this looks like a bug; run with --debug for the traceback)", err=True)
        return exc.exit_code if isinstance(exc, CrystalmeshError) else 1
    return 0


def _is_user_error(exc: Exception) -> bool:
    """Errors that describe the problem themselves (by type): the node's own error tree,
    an answer from the node's API, a message that breaks the wire rules."""
    from node.api.client import ApiError
    from protocol.envelope import InvalidEnvelope
    from protocol.schema import InvalidMessage

    return isinstance(exc, CrystalmeshError | ApiError | InvalidEnvelope | InvalidMessage)


if __name__ == "__main__":
    sys.exit(main())

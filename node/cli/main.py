"""The ``crystalmesh`` command: the root group (``node.cli.node``) with every command group added.

One file per group, each command registered on its group in that file
(``@memory.command(...)``); this module only assembles the groups and turns
what a command raises into one line and an exit code.
"""

from __future__ import annotations

import os
import sys
import traceback

import click

from node.cli.bounty import bounty
from node.cli.context import CliError
from node.cli.devnet import devnet
from node.cli.market import market
from node.cli.mcp import mcp
from node.cli.memory import memory
from node.cli.models import models
from node.cli.node import cli
from node.cli.skill import skill
from node.cli.trust import trust
from node.cli.wallet import wallet
from node.cli.weather import weather
from node.errors import CrystalmeshError

cli.add_command(bounty)
cli.add_command(devnet)
cli.add_command(market)
cli.add_command(mcp)
cli.add_command(memory)
cli.add_command(models)
cli.add_command(skill)
cli.add_command(trust)
cli.add_command(wallet)
cli.add_command(weather)


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
    from node.api import ApiError
    from protocol.envelope import InvalidEnvelope
    from protocol.schema import InvalidMessage

    return isinstance(exc, CrystalmeshError | ApiError | InvalidEnvelope | InvalidMessage)


if __name__ == "__main__":
    sys.exit(main())

"""The ``crystalmesh`` command: the root group (``node.cli.node``) with every command group added.

One file per group, each command registered on its group in that file
(``@memory.command(...)``); this module only assembles the groups and turns
what a command raises into one line and an exit code.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click


def assembled() -> click.Group:
    """The root group with every command group added (imported here, not at module import:
    ``crystalmesh hook …`` answers before any of it is loaded)."""
    from node.cli.bounty import bounty
    from node.cli.devnet import devnet
    from node.cli.hosts import hook, integrate
    from node.cli.market import market
    from node.cli.mcp import mcp
    from node.cli.memory import memory
    from node.cli.models import models
    from node.cli.node import cli
    from node.cli.skill import skill
    from node.cli.trust import trust
    from node.cli.wallet import wallet
    from node.cli.weather import weather

    cli.add_command(bounty)
    cli.add_command(devnet)
    cli.add_command(hook)
    cli.add_command(integrate)
    cli.add_command(market)
    cli.add_command(mcp)
    cli.add_command(memory)
    cli.add_command(models)
    cli.add_command(skill)
    cli.add_command(trust)
    cli.add_command(wallet)
    cli.add_command(weather)
    return cli


def __getattr__(name: str) -> object:
    """``from node.cli.main import cli``: the assembled root group."""
    if name == "cli":
        return assembled()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: user mistakes become one line on stderr and exit code 1. ``hook claude-code``
    and ``hook codex`` take the fast path (``node.cli.hosts``): an agent host waits on them."""
    args = sys.argv[1:] if argv is None else argv
    from node.cli.hosts import hook_fast_path

    fast = hook_fast_path(args)
    if fast is not None:
        return fast
    import click

    from node.cli.context import CliError
    from node.errors import CrystalmeshError

    cli = assembled()
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
            import traceback

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
    from node.errors import CrystalmeshError
    from protocol.envelope import InvalidEnvelope
    from protocol.schema import InvalidMessage

    return isinstance(exc, CrystalmeshError | ApiError | InvalidEnvelope | InvalidMessage)


if __name__ == "__main__":
    sys.exit(main())

"""What every CLI command shares: which node it addresses, output mode, API access."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from node.api import ApiClient, running_node
from node.config import NodeConfig, crystalmesh_home, load_config

F = TypeVar("F", bound=Callable[..., Any])


class CliError(click.ClickException):
    """A user-facing failure: printed as one line, exit code 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


@dataclass
class CliContext:
    data_dir: Path | None = None
    node_name: str | None = None
    devnet_dir: Path | None = None
    as_json: bool = False
    debug: bool = False
    get: str | None = None

    def resolve_data_dir(self) -> Path:
        if self.node_name:
            from node.devnet import resolve_node_dir

            return resolve_node_dir(self.node_name, self.devnet_dir)
        if self.data_dir:
            return self.data_dir.expanduser()
        env = os.environ.get("CRYSTALMESH_DATA_DIR")
        return Path(env).expanduser() if env else crystalmesh_home() / "default"

    def config(self) -> NodeConfig:
        return load_config(self.resolve_data_dir())

    def api(self, required: bool = True) -> ApiClient | None:
        """Client for the node running on this data dir (None if it is not running)."""
        config = self.config()
        client = running_node(config)
        if client is None and required:
            raise CliError(
                f"no node is running on {config.data_dir}; start it with `crystalmesh run` "
                f"(or `crystalmesh devnet up`)"
            )
        return client

    # --- output -------------------------------------------------------------------------------
    def emit(self, data: Any, human: Callable[[Any], None] | None = None) -> None:
        if self.get:
            click.echo(pick(data, self.get))
            return
        if self.as_json or human is None:
            click.echo(json.dumps(data, indent=2, default=str))
        else:
            human(data)


def pick(data: Any, path: str) -> str:
    """``--get listing_id`` / ``--get 0.listing_id``: one value of the JSON result, raw."""
    value = data
    for part in path.split("."):
        try:
            value = value[int(part)] if isinstance(value, list) else value[part]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise CliError(f"--get {path}: no {part!r} in the result") from exc
    return value if isinstance(value, str) else json.dumps(value, default=str)


def console() -> Console:
    probe = Console()
    # Piped output (scripts, CI logs) gets a wide fixed width instead of 80 columns.
    width = probe.width if probe.is_terminal else 160
    return Console(highlight=False, soft_wrap=False, width=max(100, width))


def table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    out = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*["" if cell is None else str(cell) for cell in row])
    console().print(out)


def common_options(function: F) -> F:
    """Accept --data-dir/--node/--dir/--json after the subcommand too (git-style)."""

    @click.option("--json", "as_json", is_flag=True, default=False, help="Machine-readable output.")
    @click.option("--get", "get", default=None, metavar="FIELD",
                  help="Print one field of the JSON result (e.g. id, 0.listing_id).")
    @click.option("--data-dir", type=click.Path(path_type=Path), default=None, help="Node data dir.")
    @click.option("--node", "node_name", default=None, help="Address a devnet node by name.")
    @click.option(
        "--dir", "devnet_dir", type=click.Path(path_type=Path), default=None, help="Devnet dir."
    )
    @functools.wraps(function)
    def wrapper(
        *args: Any,
        as_json: bool,
        get: str | None,
        data_dir: Path | None,
        node_name: str | None,
        devnet_dir: Path | None,
        **kwargs: Any,
    ) -> Any:
        ctx: CliContext = click.get_current_context().ensure_object(CliContext)
        ctx.as_json = ctx.as_json or as_json
        ctx.get = get or ctx.get
        ctx.data_dir = data_dir or ctx.data_dir
        ctx.node_name = node_name or ctx.node_name
        ctx.devnet_dir = devnet_dir or ctx.devnet_dir
        return function(ctx, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def stderr(message: str) -> None:
    sys.stderr.write(message + "\n")

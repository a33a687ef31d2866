"""What every CLI command shares: which node it addresses, output mode, API access."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from node.api import ApiClient, running_node
from node.config import NodeConfig, crystalmesh_home, load_config

if TYPE_CHECKING:
    from node.cli.local import LocalNode
    from node.memory import Memory

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

    def running(self) -> ApiClient | None:
        """Client for the node running on this data dir (None if it is not running)."""
        return running_node(self.config())

    def api(self) -> ApiClient:
        """Client for the node running on this data dir; without one, the command stops here."""
        config = self.config()
        client = running_node(config)
        if client is None:
            raise CliError(
                f"no node is running on {config.data_dir}; start it with `crystalmesh run` "
                f"(or `crystalmesh devnet up`)"
            )
        return client

    def client(self) -> ApiClient | LocalNode:
        """The running node's client, or (none running) the data dir's memory opened here on
        first use and closed when the command ends: for the commands that work without a node."""
        client = self.running()
        if client is not None:
            return client
        from node.cli.local import LocalNode

        local = LocalNode(self.memory)
        click.get_current_context().call_on_close(local.close)
        return local

    def memory(self) -> Memory:
        """The data dir's memory, opened by this process (the caller closes it)."""
        from node.crystals import stderr_progress
        from node.memory import Memory

        return Memory(self.initialised(), progress=None if self.as_json else stderr_progress("indexing"))

    def initialised(self) -> NodeConfig:
        """The config of a data dir ``crystalmesh init`` has made (else the command stops here)."""
        config = self.config()
        if not config.config_path.exists():
            raise CliError(f"{config.data_dir} is not initialised; run `crystalmesh init` first")
        return config

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


def when(ms: int | None, style: str = "%Y-%m-%d %H:%M") -> str:
    """A millisecond timestamp as UTC text ("-" when unset)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime(style) if ms else "-"


def shorten(text: str, width: int = 70) -> str:
    """``text`` on one line of at most ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def stderr(message: str) -> None:
    sys.stderr.write(message + "\n")


# --- amounts and durations as a user types and reads them ------------------------------------
def usdc(micro: int | None) -> str:
    if micro is None:
        return "-"
    return f"{micro / 1_000_000:.6f} USDC"


def parse_duration(text: str) -> int:
    """'90', '90s', '5m', '2h' -> seconds."""
    match = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a duration like 90s, 5m or 1h")
    value, unit = int(match.group(1)), match.group(2) or "s"
    return value * {"s": 1, "m": 60, "h": 3600}[unit]


def parse_usdc(text: str) -> int:
    """'0.05' (USDC) -> 50000 micro-USDC, exactly (no float rounding)."""
    match = re.fullmatch(r"\s*(\d+)(?:\.(\d{1,6}))?\s*", text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a USDC amount like 0.05 (at most 6 decimals)")
    whole, fraction = match.group(1), (match.group(2) or "").ljust(6, "0")
    return int(whole) * 1_000_000 + int(fraction)

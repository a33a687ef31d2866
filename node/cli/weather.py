"""``crystalmesh weather ...``: the network's cortisol weather (management alerts)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from node.cli.context import CliContext, common_options, parse_duration


@click.group()
def weather() -> None:
    """Network cortisol weather: status, and broadcast or lift on a management node."""


def describe_weather(weather: dict[str, Any]) -> str:
    if not weather.get("active"):
        return "clear"
    remaining = int(weather.get("remaining_ms", 0)) // 1000
    return (f"cortisol {weather['level']:.2f} for {remaining // 60}m{remaining % 60:02d}s more"
            f" ({weather.get('reason') or 'no reason'}); untrusted ingestion halted")


@weather.command("broadcast")
@click.option("--level", type=click.FloatRange(0.0, 1.0), required=True, help="Cortisol level 0..1.")
@click.option("--duration", default="5m", show_default=True, help="How long: 90s, 5m, 1h.")
@click.option("--reason", default="", help="Why (shown to operators, ≤ 280 chars).")
@common_options
def weather_broadcast(ctx: CliContext, level: float, duration: str, reason: str) -> None:
    """Sign and gossip a weather alert (management nodes only).

    \f
    Example: ``crystalmesh --node management weather broadcast --level 0.8 --duration 10m``
    """
    data = ctx.api().broadcast_weather(level, parse_duration(duration), reason)
    ctx.emit(data, lambda d: click.echo(
        f"broadcast cortisol {d['level']:.2f} until "
        f"{datetime.fromtimestamp(d['expires_at_ms'] / 1000, UTC):%H:%M:%S} UTC"))


@weather.command("lift")
@click.option("--reason", default="", help="Why (gossiped with the lift, <= 280 chars).")
@common_options
def weather_lift(ctx: CliContext, reason: str) -> None:
    """End this management node's alerts early, on every node (a signed weather_lift).

    \f
    Example: ``crystalmesh --node management weather lift --reason "false alarm"``
    """
    data = ctx.api().lift_weather(reason)
    ctx.emit(data, lambda d: click.echo(
        f"lifted (seq {d['seq']}); weather here now: {describe_weather(d['weather'])}"))


@weather.command("status")
@common_options
def weather_status(ctx: CliContext) -> None:
    """The weather this node obeys now."""
    ctx.emit(ctx.api().weather(), lambda d: click.echo(describe_weather(d)))

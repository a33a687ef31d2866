"""Network "cortisol weather": management alerts broadcast, applied and reported.

A management node signs an alert (level, absolute expiry, reason); every node
raises its effective cortisol to the alert's level until the signed expiry
and, while it lasts, halts ingestion from anyone below "trusted". The same node
may sign a lift: every node ends that key's alerts issued up to the lift's
moment (``protocol.messages.WeatherLift``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from node import metrics
from node.config import NodeConfig
from node.crystals import now_ms
from node.errors import NodeError, NotManagementNode
from node.memory import AsyncMemory
from protocol.envelope import Envelope
from protocol.identity import Identity
from protocol.messages import WeatherAlert, WeatherLift
from protocol.schema import PPM
from protocol.topics import WEATHER

log = logging.getLogger(__name__)


class WeatherDesk:
    def __init__(self, config: NodeConfig, identity: Identity, memory: AsyncMemory,
                 gossip_publish: Callable[..., Awaitable[Envelope]], is_management: bool) -> None:
        self.config = config
        self.identity = identity
        self.memory = memory
        self.gossip_publish = gossip_publish
        self.is_management = is_management

    def status(self) -> dict[str, Any]:
        hormones = self.memory.hormones
        return hormones.weather() | {
            "halt_untrusted_ingestion": hormones.consolidation_modulation().halt_untrusted_ingestion
        }

    async def on_weather(self, envelope: Envelope) -> None:
        alert = envelope.message()
        if envelope.sender != self.identity.public_key:
            metrics.count_accepted(WEATHER, envelope.issued_at_ms)
        if isinstance(alert, WeatherLift):
            await self._on_lift(envelope.sender.hex(), alert)
            return
        assert isinstance(alert, WeatherAlert)
        applied = self.memory.hormones.apply_network_cortisol_spike(
            alert.cortisol_level_ppm / PPM, alert.expires_at_ms, alert.reason,
            alert.issued_at_ms, envelope.sender.hex()
        )
        log.warning(
            "weather alert level=%.2f expires_at_ms=%d reason=%s applied=%s",
            alert.cortisol_level_ppm / PPM,
            alert.expires_at_ms,
            alert.reason,
            applied,
        )
        await self.memory.save_hormones()

    async def _on_lift(self, sender: str, lift: WeatherLift) -> None:
        ended = self.memory.hormones.lift_network_cortisol(sender, lift.issued_at_ms)
        log.warning("weather lift sender=%s issued_at_ms=%d reason=%s ended=%d",
                    sender[:16], lift.issued_at_ms, lift.reason, ended)
        await self.memory.save_hormones()

    def _require_management(self) -> None:
        if not self.is_management:
            raise NotManagementNode(
                "this node is not a management node: its public key "
                f"{self.identity.public_key.hex()} is not in [net] management_keys"
            )

    async def lift(self, reason: str) -> dict[str, Any]:
        """Sign and gossip an early end of this node's alerts (management nodes only)."""
        self._require_management()
        before = self.status()
        issued = now_ms()
        lift = WeatherLift(issued_at_ms=issued, reason=reason[:280])
        envelope = await self.gossip_publish(WEATHER, lift, issued_at_ms=issued)
        metrics.GOSSIP_PUBLISHED.labels(topic=WEATHER).inc()
        await self.on_weather(envelope)
        return {"issued_at_ms": issued, "reason": lift.reason, "seq": envelope.seq,
                "was_active": bool(before.get("active")), "weather": self.status()}

    async def broadcast(self, level: float, duration_s: int, reason: str) -> dict[str, Any]:
        self._require_management()
        if not 0.0 <= level <= 1.0:
            raise NodeError("level must be between 0 and 1")
        if not 0 < duration_s <= self.config.net.max_weather_duration_s:
            raise NodeError(
                f"duration must be between 1 s and {self.config.net.max_weather_duration_s} s"
            )
        issued = now_ms()
        alert = WeatherAlert(
            cortisol_level_ppm=round(level * PPM),
            issued_at_ms=issued,
            expires_at_ms=issued + duration_s * 1000,
            reason=reason[:280],
        )
        envelope = await self.gossip_publish(WEATHER, alert, issued_at_ms=issued)
        metrics.GOSSIP_PUBLISHED.labels(topic=WEATHER).inc()
        await self.on_weather(envelope)
        return {"issued_at_ms": issued, "expires_at_ms": alert.expires_at_ms,
                "level": level, "reason": alert.reason, "seq": envelope.seq}

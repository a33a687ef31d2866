"""The operator's undo: lift a weather alert early, ban or unban a peer by hand, revoke an
endorsement; each act, once it took effect, is written to the audit log (``node.audit``).

What the local API's operator routes call (``node.api.interface.OperatorApi``); the API
token (or a dashboard session) is the operator's credential. Peers are named by libp2p
peer id or by their 64-hex public key; a management key is never banned by hand, as it
is never banned by scoring.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from node.audit import AuditLog
from node.errors import NodeError
from node.trust import TrustService
from node.weather import WeatherDesk
from protocol.identity import peer_id_from_public_key, public_key_from_peer_id

StoreRunner = Callable[..., Awaitable[Any]]
_HEX_KEY = re.compile(r"[0-9a-fA-F]{64}")


def peer_key(peer: str) -> str:
    """A peer id or a hex public key as the hex public key; NodeError if it is neither."""
    peer = peer.strip()
    if _HEX_KEY.fullmatch(peer):
        return peer.lower()
    try:
        return public_key_from_peer_id(peer).hex()
    except ValueError:
        raise NodeError(f"{peer[:80]!r} is neither a peer id (12D3Koo…) nor a 64-hex public key") from None


class OperatorDesk:
    def __init__(self, audit: AuditLog, trust: TrustService, run_in_store: StoreRunner,
                 net_ban: Callable[[str], None], net_unban: Callable[[str], None],
                 weather: WeatherDesk,
                 revoke: Callable[[str], Awaitable[dict[str, Any]]] | None = None) -> None:
        self.audit = audit
        self.trust = trust
        self._run_in_store = run_in_store
        self._net_ban = net_ban
        self._net_unban = net_unban
        self.weather = weather
        self._revoke = revoke

    async def _write(self, action: str, target: str, detail: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = await trio.to_thread.run_sync(self.audit.append, action, target, detail)
        return entry

    def _row(self, key: str) -> dict[str, Any]:
        return next((row for row in self.trust.show() if row["peer_key"] == key),
                    {"peer_key": key, "peer_id": peer_id_from_public_key(bytes.fromhex(key))})

    async def ban(self, peer: str, reason: str = "") -> dict[str, Any]:
        """Ban now: no skills, reports or messages from it, cut off from the mesh; lasts until unban."""
        key = peer_key(peer)
        if key in self.trust.management:
            raise NodeError("a management key cannot be banned")
        if key == self.trust.own_key.hex():
            raise NodeError("a node cannot ban itself")
        await self._run_in_store(self.trust.ban, key, f"operator: {reason}" if reason else "operator")
        peer_id = peer_id_from_public_key(bytes.fromhex(key))
        self._net_ban(peer_id)
        entry = await self._write("trust_ban", peer_id, {"peer_key": key, "reason": reason})
        return self._row(key) | {"audit": entry}

    async def unban(self, peer: str, reason: str = "") -> dict[str, Any]:
        """Lift a ban (manual or earned by offences); past offences are forgiven, history stays."""
        key = peer_key(peer)
        await self._run_in_store(self.trust.unban, key)
        peer_id = peer_id_from_public_key(bytes.fromhex(key))
        self._net_unban(peer_id)
        entry = await self._write("trust_unban", peer_id, {"peer_key": key, "reason": reason})
        return self._row(key) | {"audit": entry}

    async def lift_weather(self, reason: str = "") -> dict[str, Any]:
        """Sign and gossip the early end of this management node's alerts."""
        result = await self.weather.lift(reason)
        entry = await self._write("weather_lift", f"seq {result['seq']}",
                                  {"reason": reason, "was_active": result["was_active"]})
        return result | {"audit": entry}

    async def revoke_endorsement(self, listing_id: str, reason: str = "") -> dict[str, Any]:
        """Withdraw this management node's endorsement of a listing, on every node."""
        if self._revoke is None:
            raise NodeError("endorsements cannot be revoked on this node")
        result = await self._revoke(listing_id)
        entry = await self._write("endorsement_revoke", result["listing_id"], {"reason": reason})
        return result | {"audit": entry}

    async def entries(self, limit: int = 100) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await trio.to_thread.run_sync(self.audit.tail, limit)
        return found

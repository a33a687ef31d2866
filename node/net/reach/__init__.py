"""Reachability: whether this node can be dialled, and how to reach one that cannot.

AutoNAT (``autonat``), circuit relay v2 with bounded resources (``relay``), the
client side of relays and relayed dials (``relay_client``) and the object the net
service runs (``reachability``: status, reservations, DCUtR upgrades).

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.net.reach.reachability import Reachability as Reachability
    from node.net.reach.reachability import ReachabilityConfig as ReachabilityConfig
    from node.net.reach.reachability import connection_kind as connection_kind

__getattr__ = face(__name__)

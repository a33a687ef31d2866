"""libp2p host, gossipsub topics + validators, purchase request/response.

``NetService`` (node.net.service) is the one object the node service runs;
the modules split by concept: ``host`` (key, transports), ``gossip_config``
(gossipsub parameters), ``gossip`` (publish / receive), ``peers`` (bootstrap,
reconnect, ban list), ``reqresp`` (purchase protocol transport); two wings:
``rules`` (validation, per-origin rate limits, replay guards, peer scoring) and
``reach`` (AutoNAT, the bounded relay, reservations and relayed dialling, DCUtR:
nodes behind NAT reachable through relays).

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.net import progress as progress
    from node.net.listing_sync import SyncScope as SyncScope
    from node.net.reqresp import PeerBusy as PeerBusy
    from node.net.reqresp import PeerUnreachable as PeerUnreachable
    from node.net.reqresp import ReqRespError as ReqRespError
    from node.net.rules.validation import Rejection as Rejection
    from node.net.service import NetService as NetService

__getattr__ = face(__name__)

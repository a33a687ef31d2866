"""Process-wide py-libp2p 0.8.1 tweaks: some cut per-message CPU without changing
the wire or its semantics, others contain what could kill the node.

All are applied by ``apply()`` (idempotent), called when a host is built.
The library members a patch replaces are listed in ``node.net.libp2p_compat`` (with every
other private member the node uses, and the version checked), whose test fails when one goes.

Where each item lives (its text is in that module's docstring):

- ``frames``: 1. yamux window updates; 19. buffered TCP reads; 20. frame writes without
  a pass per lock; 21. the stream table's lock without a pass; 23. Noise packets read
  without copies or log lines; 24. stream reads without debug lines.
- ``incoming``: 22. the yamux receive loop over whole messages.
- ``pubsub_receive``: 2. signed peer records; 3. the blacklist teardown race; 4.
  containment of hostile frames; 6. buffered pubsub reads; 7. duplicates stop at the
  read loop; 9. unique messages handled in the read loop; 15. the validation cache in
  constant time; 16. score gates that cannot refuse; 17. subscription queues as deep as
  our inbox; 26. pubsub RPCs cut from the read buffer.
- ``pubsub_send``: 8. our signed peer record; 10. one serialisation per forwarded
  message; 11. one write for what is queued together; 12. flood publishing; 13.
  sequence numbers survive a restart; 25. pubsub writes without a pass on NetStream's
  lock; 27. a peer whose stream from us died keeps its subscriptions.
- ``connections``: 14. a connection carrying a request is never trimmed; 18. one round
  trip to open a stream.
- ``install``: ``apply()``; 5. routine failures the library logs at WARNING/ERROR (a
  DHT stream read failing, a dial to a dead address, a stream reset) are counted and
  lowered to DEBUG by ``node.net.failures.install()``.

Rule: outside this package, import only the names below (``node/face.py``).

The items are written against py-libp2p 0.8.1 (pinned in pyproject.toml) and
``apply()`` refuses another version: most replace a library function with a copy
that assumes its internals (``_SUPPORTED_LIBP2P``).

Not here, on purpose: the Kademlia protocol id. The library's
``/ipfs/kad/1.0.0`` is a module constant, but patching it would put every DHT
of the process on one network; ``node.net.dht`` gives each DHT a view of its
host that speaks ``/crystalmesh/<network>/kad/1.0.0`` instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.net.libp2p_tuning.connections import (
        PipelinedMultiselectClient as PipelinedMultiselectClient,
    )
    from node.net.libp2p_tuning.install import apply as apply
    from node.net.libp2p_tuning.install import check_version as check_version
    from node.net.libp2p_tuning.pubsub_receive import read_rpc as read_rpc
    from node.net.libp2p_tuning.pubsub_send import cached_local_record as cached_local_record

__getattr__ = face(__name__)

"""Resource subscriptions: MEMORY.md, the scratch notes and the skill index tell a client they changed.

Which resources: ``crystalmesh://working/<namespace>/MEMORY.md`` and ``.../notes.md`` (any
namespace), ``skill://index.json``, and any ``skill://`` file (they follow the index).

How a change is seen: this process is a client of the node's API and holds no data, so it
polls. Every ``POLL_INTERVAL_S``, and only while at least one subscription is open, one
``ApiClient.working_versions`` call (the API token in its header, like every call) returns
version tags of every watched namespace's files and of the skill index
(``node.memory.working.resource_versions``: one ``lstat`` per file and one indexed query, far
cheaper than re-reading the resources). Polling the API rather than watching files keeps
the node the only reader of its data directory, works the same for a node on another
data dir or behind ``--node``, and also sees changes that are not files (the skill index
lives in SQLite). Each subscription takes its baseline version before it is acknowledged,
so a change right after subscribing is never lost.

Both eras of the protocol, with the SDK's own mechanisms:

- 2025 clients send ``resources/subscribe`` / ``resources/unsubscribe``
  (:meth:`ResourceWatch.subscribe`, registered on the SDK's low-level server, which then
  advertises ``resources.subscribe``); a change is sent with
  ``ServerSession.send_resource_updated`` to the connections that subscribed to that URI
  and to no other. A connection that closes drops its subscriptions (its teardown stack),
  and a send that fails drops that connection's subscriptions; neither reaches the server.
- 2026-07-28 clients open ``subscriptions/listen`` streams, served by the SDK's
  ``ListenHandler`` over the server's ``SubscriptionBus``; :meth:`ResourceWatch.listen_middleware`
  watches the URIs a stream asks for while it is open, and a change is published on the bus
  as ``ResourceUpdated`` (the SDK delivers it to the streams whose filter names the URI).
"""

from __future__ import annotations

import itertools
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    EmptyResult,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)

from node.api import ApiClient

log = logging.getLogger(__name__)

Call = Callable[[Callable[[ApiClient], Any]], Awaitable[Any]]
Key = tuple[str, str]  # ("memory_md" | "notes", namespace) or ("skills", "default")

POLL_INTERVAL_S = 1.0  # a note shows within a second; an idle server (no subscription) polls nothing
MAX_WATCHED_NAMESPACES = 64  # node.api.routes.working.MAX_VERSION_NAMESPACES: one request per poll
MAX_URIS_PER_CONNECTION = 128
SKILLS: Key = ("skills", "default")
_WORKING_URI = re.compile(
    r"crystalmesh://working/(?P<namespace>[a-z][a-z0-9_-]{0,31}(?::[A-Za-z0-9._@-]{1,64})?)"
    r"/(?P<file>MEMORY\.md|notes\.md)")
_FILE_KEYS = {"MEMORY.md": "memory_md", "notes.md": "notes"}


def version_key(uri: str) -> Key | None:
    """Which version a resource URI follows, or None if it is not a subscribable resource."""
    if uri.startswith("skill://") and len(uri) <= 1024:
        return SKILLS
    match = _WORKING_URI.fullmatch(uri)
    if match is None:
        return None
    return _FILE_KEYS[match["file"]], match["namespace"]


def _connection_of(session: ServerSession) -> Connection:
    """The connection a request came on: its identity and its teardown stack.

    The SDK's request context carries the connection only privately in 2.3 (its runner
    marks the context for a rework, TODO L54); this is the one place we reach for it.
    """
    connection: Connection = session._connection
    return connection


@dataclass
class _Subscriber:
    """A 2025-era connection's subscriptions and the session to notify it through."""

    session: ServerSession
    uris: set[str] = field(default_factory=set)


class ResourceWatch:
    """Subscriptions of every client of one MCP server, and the poll that serves them."""

    def __init__(self, call: Call, bus: SubscriptionBus, poll_interval_s: float = POLL_INTERVAL_S) -> None:
        self._call = call
        self._bus = bus
        self.poll_interval_s = poll_interval_s
        self._subscribers: dict[int, _Subscriber] = {}
        self._listened: Counter[str] = Counter()
        self._versions: dict[Key, tuple[str | None, int]] = {}  # version, sequence of its fetch
        self._fetches = itertools.count(1)
        self._poller: anyio.Lock | None = None

    # --- what is watched ------------------------------------------------------------------------
    def uris(self) -> set[str]:
        """Every URI some client is subscribed to."""
        subscribed = {uri for subscriber in self._subscribers.values() for uri in subscriber.uris}
        return subscribed | set(self._listened)

    def keys(self) -> set[Key]:
        return {key for uri in self.uris() if (key := version_key(uri)) is not None}

    def _check_room(self, new_keys: Iterable[Key]) -> None:
        namespaces = {key[1] for key in self.keys() | set(new_keys) if key != SKILLS}
        if len(namespaces) > MAX_WATCHED_NAMESPACES:
            raise MCPError(INVALID_REQUEST, f"at most {MAX_WATCHED_NAMESPACES} namespaces can be watched")

    # --- 2025-era resources/subscribe ----------------------------------------------------------
    async def subscribe(self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        """``resources/subscribe``: updates of ``params.uri`` go to this connection from now on."""
        uri = str(params.uri)
        key = version_key(uri)
        if key is None:
            raise MCPError(INVALID_PARAMS, f"{uri[:200]} is not a resource that can be subscribed to: "
                                           "MEMORY.md, notes.md or a skill:// resource")
        connection = _connection_of(ctx.session)
        subscriber = self._subscribers.get(id(connection))
        if subscriber is not None and len(subscriber.uris) >= MAX_URIS_PER_CONNECTION and uri not in subscriber.uris:
            raise MCPError(INVALID_REQUEST, f"at most {MAX_URIS_PER_CONNECTION} subscriptions per connection")
        self._check_room([key])
        await self._baseline([key])
        subscriber = self._subscribers.get(id(connection))  # the baseline awaited: look again
        if subscriber is None:
            subscriber = self._subscribers[id(connection)] = _Subscriber(ctx.session)
            connection.exit_stack.callback(self._forget, id(connection))
        subscriber.uris.add(uri)
        return EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext[Any, Any],
                          params: UnsubscribeRequestParams) -> EmptyResult:
        """``resources/unsubscribe``: no more updates of ``params.uri`` for this connection."""
        key = id(_connection_of(ctx.session))
        subscriber = self._subscribers.get(key)
        if subscriber is not None:
            subscriber.uris.discard(str(params.uri))
            if not subscriber.uris:
                del self._subscribers[key]
        self._drop_unwatched()
        return EmptyResult()

    def _forget(self, connection_key: int) -> None:
        """A connection closed (or could not be sent to): its subscriptions end."""
        if self._subscribers.pop(connection_key, None) is not None:
            log.debug("MCP connection gone: its resource subscriptions ended")
        self._drop_unwatched()

    # --- 2026-era subscriptions/listen ---------------------------------------------------------
    async def listen_middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Watch the resource URIs of a ``subscriptions/listen`` stream for as long as it is open."""
        if ctx.method != "subscriptions/listen" or ctx.request_id is None:
            return await call_next(ctx)
        uris = [uri for uri in _listen_uris(ctx.params)[:MAX_URIS_PER_CONNECTION] if version_key(uri)]
        keys = {key for uri in uris if (key := version_key(uri)) is not None}
        self._check_room(keys)
        await self._baseline(keys)
        self._listened.update(uris)
        try:
            return await call_next(ctx)
        finally:
            self._listened.subtract(uris)
            self._listened = +self._listened  # drop the URIs no stream listens to any more
            self._drop_unwatched()

    # --- the poll -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Poll while anything is subscribed; one loop per server however many sessions run it."""
        if self._poller is None:
            self._poller = anyio.Lock()
        async with self._poller:
            while True:
                await anyio.sleep(self.poll_interval_s)
                if self.keys():
                    await self.poll()

    async def poll(self) -> None:
        """Fetch the versions of everything watched; notify the subscribers of what changed."""
        keys = self.keys()
        fetched = await self._fetch(keys)
        if fetched is None:
            return
        sequence, versions = fetched
        changed: list[Key] = []
        for key in keys:
            known = self._versions.get(key)
            if known is not None and known[1] > sequence:
                continue  # a newer baseline was taken while this poll was under way
            version = versions.get(key)
            self._versions[key] = (version, sequence)
            # No baseline yet (the node was down when it was taken): this answer is the baseline.
            if known is not None and known[0] is not None and version is not None and version != known[0]:
                changed.append(key)
        if changed:
            await self._notify(set(changed))

    async def _baseline(self, keys: Iterable[Key]) -> None:
        missing = {key for key in keys if key not in self._versions}
        if not missing:
            return
        fetched = await self._fetch(missing)
        sequence, versions = fetched if fetched is not None else (0, {})
        for key in missing:  # unknown (node down) stays None: the first poll that answers sets it
            if key not in self._versions or self._versions[key][1] < sequence:
                self._versions[key] = (versions.get(key), sequence)

    async def _fetch(self, keys: set[Key]) -> tuple[int, dict[Key, str]] | None:
        if not keys:
            return None
        sequence = next(self._fetches)
        namespaces = sorted({key[1] for key in keys if key != SKILLS}) or ["default"]
        skills = SKILLS in keys
        try:
            answer: dict[str, Any] = await self._call(
                lambda client: client.working_versions(namespaces, skills=skills))
        except Exception as error:  # the node may be down for a while; subscriptions wait for it
            log.info("resource versions not available: %s", error)
            return None
        versions: dict[Key, str] = {}
        for namespace, files in (answer.get("namespaces") or {}).items():
            for name in ("memory_md", "notes"):
                if isinstance(files, dict) and isinstance(files.get(name), str):
                    versions[(name, namespace)] = files[name]
        if isinstance(answer.get("skills"), str):
            versions[SKILLS] = answer["skills"]
        return sequence, versions

    async def _notify(self, changed: set[Key]) -> None:
        for connection_key, subscriber in list(self._subscribers.items()):
            for uri in sorted(subscriber.uris):
                if version_key(uri) not in changed:
                    continue
                try:
                    await subscriber.session.send_resource_updated(uri)
                except Exception as error:  # a client that vanished must not stop the others
                    log.info("resource update not delivered (%s): dropping that connection's subscriptions",
                             error)
                    self._forget(connection_key)
                    break
        for uri in sorted(self._listened):
            if version_key(uri) in changed:
                await self._bus.publish(ResourceUpdated(uri=uri))

    def _drop_unwatched(self) -> None:
        """Forget the versions nobody watches (a later subscription takes a fresh baseline)."""
        watched = self.keys()
        for key in list(self._versions):
            if key not in watched:
                del self._versions[key]


def _listen_uris(params: Any) -> list[str]:
    """The resource URIs a raw ``subscriptions/listen`` request asks for (not yet validated)."""
    notifications = params.get("notifications") if isinstance(params, Mapping) else None
    uris = notifications.get("resourceSubscriptions") if isinstance(notifications, Mapping) else None
    if not isinstance(uris, list):
        return []
    return [uri for uri in uris if isinstance(uri, str)]

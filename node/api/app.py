"""A small ASGI application: routing, bearer-token auth, JSON in and out.

Served by hypercorn's trio worker, so handlers are trio coroutines and may
await the node's services directly. No framework: the API is a handful of
JSON routes, a static dashboard and a Prometheus text endpoint.

A localhost service on a shared machine, reached by any web page the user
opens (issue 12): before a handler runs, every request passes these doors —

- ``Host`` must name the bound address (``127.0.0.1:<port>``, ``localhost:<port>``):
  DNS rebinding is answered 421;
- a declared ``Content-Length`` over ``MAX_BODY_BYTES`` is refused at once
  (413), a body that has not arrived within ``BODY_TIMEOUT_S`` ends in 408;
- JSON is parsed only after a linear scan proves its nesting is at most
  ``MAX_JSON_DEPTH`` (py_ecc raises the recursion limit, so a deep document
  would otherwise overflow the C stack); lone surrogates are refused;
- state-changing requests from another origin (``Origin`` / ``Sec-Fetch-Site``)
  are refused (403), and JSON routes need ``Content-Type: application/json``,
  which a cross-origin page cannot send without a CORS preflight we never grant;
- the API token is accepted only as ``Authorization: Bearer``; the dashboard
  uses its own session cookie (see ``node/api/dashboard.py``).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import trio

from node.errors import CrystalmeshError
from protocol.envelope import InvalidEnvelope
from protocol.schema import InvalidMessage

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 64
BODY_TIMEOUT_S = 15.0
SESSION_COOKIE = "cm_session"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
FORM_TYPE = "application/x-www-form-urlencoded"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HttpError(Exception):
    """Raised by handlers: becomes a JSON error response with this status."""

    def __init__(self, status: int, message: str, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or {400: "bad_request", 401: "unauthorized", 404: "not_found"}.get(
            status, "error"
        )


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    params: dict[str, str] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        if not self.body:
            return {}
        if json_too_deep(self.body, MAX_JSON_DEPTH):
            raise HttpError(400, f"request body nests deeper than {MAX_JSON_DEPTH} levels")
        try:
            data = json.loads(self.body)
        except (ValueError, RecursionError) as exc:
            raise HttpError(400, f"request body is not JSON: {str(exc)[:120]}") from exc
        if not isinstance(data, dict):
            raise HttpError(400, "request body must be a JSON object")
        if _has_lone_surrogate(data):
            raise HttpError(400, "request body holds a lone UTF-16 surrogate (not valid text)")
        return data

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


Handler = Callable[[Request], Awaitable[Any]]
StreamHandler = Callable[[Request, Send], Awaitable[None]]


@dataclass
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler
    public: bool = False
    stream: bool = False


def json_too_deep(body: bytes, limit: int) -> bool:
    """True if ``body``'s arrays/objects nest deeper than ``limit`` (a linear scan, no recursion)."""
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    return False


class App:
    def __init__(self, token: str) -> None:
        self.token = token
        self.routes: list[Route] = []
        # Set once the server is bound: the Host values this API answers to.
        self.allowed_hosts: frozenset[str] | None = None
        # Dashboard sessions: random cookie values, never the API token.
        self.sessions: set[str] = set()

    def bind(self, host: str, port: int) -> None:
        names = {host, "localhost", "127.0.0.1"} if host in ("127.0.0.1", "localhost") else {host}
        self.allowed_hosts = frozenset(f"{name}:{port}" for name in names)

    def route(self, method: str, path: str, public: bool = False, stream: bool = False) -> Callable[[Handler], Handler]:
        regex = "^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", path) + "$"

        def register(handler: Handler) -> Handler:
            self.routes.append(Route(method, re.compile(regex), handler, public, stream))
            return handler

        return register

    def _authorised(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        supplied = header[7:] if header.lower().startswith("bearer ") else ""
        if supplied:
            return hmac.compare_digest(supplied.encode(), self.token.encode())
        session = self.session_of(request)
        return session is not None

    def session_of(self, request: Request) -> str | None:
        """The dashboard session named by the request's cookie, if it is a live one."""
        cookie = request.headers.get("cookie", "")
        match = re.search(rf"(?:^|;\s*){SESSION_COOKIE}=([A-Za-z0-9_-]{{20,100}})", cookie)
        if match is None:
            return None
        value = match.group(1)
        return value if any(hmac.compare_digest(value, live) for live in self.sessions) else None

    def _door(self, request: Request) -> Response | None:
        """The checks every request passes before routing (see the module docstring)."""
        if self.allowed_hosts is not None and request.headers.get("host", "") not in self.allowed_hosts:
            return _json_response(421, {"error": "this API answers only to its bound address",
                                        "code": "misdirected"})
        if request.method not in SAFE_METHODS:
            origin = request.headers.get("origin")
            if origin is not None and self.allowed_hosts is not None and origin not in {
                f"http://{host}" for host in self.allowed_hosts
            }:
                return _json_response(403, {"error": "cross-origin request refused",
                                            "code": "forbidden"})
            if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
                return _json_response(403, {"error": "cross-site request refused",
                                            "code": "forbidden"})
            content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if request.body and content_type not in ("application/json", FORM_TYPE):
                return _json_response(415, {"error": "send JSON (Content-Type: application/json)",
                                            "code": "unsupported_media_type"})
            if content_type == FORM_TYPE and not request.path.startswith("/dashboard/"):
                return _json_response(415, {"error": "send JSON (Content-Type: application/json)",
                                            "code": "unsupported_media_type"})
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
            await self._send(send, _json_response(413, {"error": "request body too large",
                                                         "code": "too_large"}))
            return
        body = b""
        more = True
        with trio.move_on_after(BODY_TIMEOUT_S) as slow:
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > MAX_BODY_BYTES:
                    await self._send(send, _json_response(413, {"error": "request body too large",
                                                                 "code": "too_large"}))
                    return
        if slow.cancelled_caught:
            await self._send(send, _json_response(408, {"error": "request body too slow",
                                                         "code": "timeout"}))
            return
        request = Request(
            method=scope["method"],
            path=scope["path"],
            query=parse_qs(scope.get("query_string", b"").decode("latin-1")),
            headers=headers,
            body=body,
        )
        refused = self._door(request)
        if refused is not None:
            await self._send(send, refused)
            return
        response = await self._dispatch(request, send)
        if response is not None:
            await self._send(send, response)

    async def _dispatch(self, request: Request, send: Send) -> Response | None:
        path_matched = False
        for route in self.routes:
            match = route.pattern.match(request.path)
            if not match:
                continue
            path_matched = True
            if route.method != request.method:
                continue
            request.params = match.groupdict()
            if not route.public and not self._authorised(request):
                return _json_response(401, {"error": "missing or wrong API token", "code": "unauthorized"})
            try:
                if route.stream:
                    await route.handler(request, send)  # type: ignore[call-arg]
                    return None
                result = await route.handler(request)
            except HttpError as exc:
                return _json_response(exc.status, {"error": exc.message, "code": exc.code})
            except Exception as exc:  # a handler bug must not kill the node
                status, code = _classify(exc)
                if status >= 500:
                    log.exception("api handler failed path=%s", request.path)
                return _json_response(status, {"error": str(exc) or type(exc).__name__, "code": code})
            if isinstance(result, Response):
                return result
            return _json_response(200, result)
        if path_matched:
            return _json_response(405, {"error": "method not allowed", "code": "method_not_allowed"})
        return _json_response(404, {"error": f"no route {request.path}", "code": "not_found"})

    @staticmethod
    async def _send(send: Send, response: Response) -> None:
        headers = [(b"content-type", response.content_type.encode()),
                   (b"content-length", str(len(response.body)).encode()),
                   (b"cache-control", b"no-store"), *response.headers]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})


def _classify(exc: Exception) -> tuple[int, str]:
    """By type, never by name: the node's own errors carry their HTTP status and code
    (``node.errors.CrystalmeshError``); a message that fails the wire rules is the
    caller's problem; anything else is a bug (500)."""
    if isinstance(exc, CrystalmeshError):
        code = getattr(exc, "code", None)
        return exc.http_status, code if isinstance(code, str) else "error"
    if isinstance(exc, InvalidEnvelope | InvalidMessage):
        return 400, "invalid_message"
    return 500, "internal"


def _json_response(status: int, data: Any) -> Response:
    return Response(status, json.dumps(data, default=str).encode())


def json_response(data: Any, status: int = 200) -> Response:
    return _json_response(status, data)

"""A small ASGI application: routing, bearer-token auth, JSON in and out.

Served by hypercorn's trio worker, so handlers are trio coroutines and may
await the node's services directly. No framework: the API is a handful of
JSON routes, a static dashboard and a Prometheus text endpoint.
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

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024

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
        try:
            data = json.loads(self.body)
        except ValueError as exc:
            raise HttpError(400, f"request body is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise HttpError(400, "request body must be a JSON object")
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


class App:
    def __init__(self, token: str) -> None:
        self.token = token
        self.routes: list[Route] = []

    def route(self, method: str, path: str, public: bool = False, stream: bool = False) -> Callable[[Handler], Handler]:
        regex = "^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", path) + "$"

        def register(handler: Handler) -> Handler:
            self.routes.append(Route(method, re.compile(regex), handler, public, stream))
            return handler

        return register

    def _authorised(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        supplied = header[7:] if header.lower().startswith("bearer ") else ""
        if not supplied:
            # Browsers opening the dashboard / EventSource cannot set headers: allow
            # the token as a cookie set by the login page, or ?token= once.
            cookie = request.headers.get("cookie", "")
            match = re.search(r"(?:^|;\s*)cm_token=([^;]+)", cookie)
            supplied = match.group(1) if match else (request.arg("token") or "")
        return bool(supplied) and hmac.compare_digest(supplied, self.token)

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
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_BODY_BYTES:
                await self._send(send, _json_response(413, {"error": "request body too large",
                                                             "code": "too_large"}))
                return
        request = Request(
            method=scope["method"],
            path=scope["path"],
            query=parse_qs(scope.get("query_string", b"").decode()),
            headers={k.decode().lower(): v.decode() for k, v in scope.get("headers", [])},
            body=body,
        )
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
    """Our own exceptions are the caller's problem (4xx) unless they say otherwise
    (``http_status``); anything else is a bug (500)."""
    name = type(exc).__name__
    code = getattr(exc, "code", None)
    code = code if isinstance(code, str) else re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    status = getattr(exc, "http_status", None)
    if isinstance(status, int):
        return status, code
    if name.endswith("NotFound"):
        return 404, "not_found"
    if type(exc).__module__.split(".")[0] in {"node", "protocol"}:
        return (409 if name.endswith(("Rejected", "NotListable", "Denied", "Refused")) else 400), code
    return 500, "internal"


def _json_response(status: int, data: Any) -> Response:
    return Response(status, json.dumps(data, default=str).encode())


def json_response(data: Any, status: int = 200) -> Response:
    return _json_response(status, data)

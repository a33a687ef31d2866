"""The doors every request passes before FastAPI routes it: a pure ASGI middleware.

A localhost service on a shared machine, reached by any web page the user
opens (issue 12), so before a route runs:

- ``Host`` must name the bound address (``127.0.0.1:<port>``, ``localhost:<port>``):
  DNS rebinding is answered 421;
- a declared ``Content-Length`` over ``MAX_BODY_BYTES`` is refused at once
  (413), a body that has not arrived within ``BODY_TIMEOUT_S`` ends in 408;
- a JSON body is parsed only after a linear scan proves its nesting is at most
  ``MAX_JSON_DEPTH`` (py_ecc raises the recursion limit, so a deep document
  would otherwise overflow the C stack); lone surrogates are refused (400);
- state-changing requests from another origin (``Origin`` / ``Sec-Fetch-Site``)
  are refused (403), and bodies must be ``Content-Type: application/json``
  (a form only under ``/dashboard/``), which a cross-origin page cannot send
  without a CORS preflight we never grant (415).

Refusals use the API's error shape (``node.api.errors``). The body is read here
once and replayed to the app, so nothing downstream waits on the socket again.
A failure escaping the app after this point is logged and answered 500 with no
detail: a handler bug never stops the node nor shows a traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio

from node.api.errors import error_body
from protocol.codec import json_too_deep

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 64
BODY_TIMEOUT_S = 15.0
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


def has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(item) for item in value)
    return False


def json_body_problem(body: bytes) -> str | None:
    """Why ``body`` may not reach the JSON parser of a route, or None if it may."""
    if json_too_deep(body, MAX_JSON_DEPTH):
        return f"request body nests deeper than {MAX_JSON_DEPTH} levels"
    try:
        data = json.loads(body)  # bounded depth: cannot recurse past MAX_JSON_DEPTH
    except (ValueError, RecursionError) as exc:
        return f"request body is not JSON: {str(exc)[:120]}"
    if has_lone_surrogate(data):
        return "request body holds a lone UTF-16 surrogate (not valid text)"
    return None


class Guard:
    """ASGI middleware in front of the FastAPI app (see the module docstring)."""

    def __init__(self, app: Asgi) -> None:
        self.app = app
        # Set once the server is bound: the Host values this API answers to.
        self.allowed_hosts: frozenset[str] | None = None

    def bind(self, host: str, port: int) -> None:
        names = {host, "localhost", "127.0.0.1"} if host in ("127.0.0.1", "localhost") else {host}
        self.allowed_hosts = frozenset(f"{name}:{port}" for name in names)

    def _refuse_headers(self, method: str, headers: dict[str, str]) -> tuple[int, str, str] | None:
        if self.allowed_hosts is not None and headers.get("host", "") not in self.allowed_hosts:
            return 421, "this API answers only to its bound address", "misdirected"
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
            return 413, "request body too large", "too_large"
        if method in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None and self.allowed_hosts is not None and origin not in {
            f"http://{host}" for host in self.allowed_hosts
        }:
            return 403, "cross-origin request refused", "forbidden"
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return 403, "cross-site request refused", "forbidden"
        return None

    @staticmethod
    def _refuse_body(path: str, headers: dict[str, str], body: bytes) -> tuple[int, str, str] | None:
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        form_allowed = path.startswith("/dashboard/")
        if (body and content_type not in (JSON_TYPE, FORM_TYPE)) or (
                content_type == FORM_TYPE and not form_allowed):
            return 415, "send JSON (Content-Type: application/json)", "unsupported_media_type"
        if body and content_type == JSON_TYPE:
            problem = json_body_problem(body)
            if problem is not None:
                return 400, problem, "bad_request"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        method, path = scope["method"], scope["path"]
        refused = self._refuse_headers(method, headers)
        if refused is not None:
            await _send_error(send, *refused)
            return
        body = b""
        more = True
        with anyio.move_on_after(BODY_TIMEOUT_S) as slow:
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > MAX_BODY_BYTES:
                    await _send_error(send, 413, "request body too large", "too_large")
                    return
        if slow.cancelled_caught:
            await _send_error(send, 408, "request body too slow", "timeout")
            return
        if method not in SAFE_METHODS:
            refused = self._refuse_body(path, headers, body)
            if refused is not None:
                await _send_error(send, *refused)
                return
        await self._forward(scope, body, receive, send)

    async def _forward(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        replayed = False
        started = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def send_no_store(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                names = {key.lower() for key, _ in message.get("headers", [])}
                if b"cache-control" not in names:
                    message["headers"] = [*message.get("headers", []), (b"cache-control", b"no-store")]
            await send(message)

        try:
            await self.app(scope, replay, send_no_store)
        except Exception:  # a route bug must not kill the node nor reach the client
            log.exception("api request failed path=%s", scope.get("path"))
            if not started:
                await _send_error(send, 500, "internal error", "internal")


async def _send_error(send: Send, status: int, message: str, code: str) -> None:
    payload = error_body(message, code)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
        (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": payload})

"""Errors as the API answers them: ``{"error": "<one line>", "code": "<word>"}``.

Mapped by type, never by name: the node's own errors carry their HTTP status and
code (``node.errors.CrystalmeshError``); a message that fails the wire rules is
the caller's problem (400); a request that fails its pydantic model is a 400
whose ``error`` names each bad field (``"k: Input should be a valid integer"``)
and whose ``fields`` lists them; anything else is a bug: 500 with no detail (the
traceback goes to the log only).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from node.errors import CrystalmeshError
from protocol.envelope import InvalidEnvelope
from protocol.schema import InvalidMessage

log = logging.getLogger(__name__)

HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
              405: "method_not_allowed", 413: "too_large", 415: "unsupported_media_type"}


class ApiHttpError(CrystalmeshError):
    """Raised by a route: becomes an error response with this status and code."""

    def __init__(self, status: int, message: str, code: str = "") -> None:
        super().__init__(message)
        self.http_status = status
        self.code = code or HTTP_CODES.get(status, "error")


def error_body(message: str, code: str, **extra: Any) -> bytes:
    return json.dumps({"error": message, "code": code, **extra}).encode()


def error_response(status: int, message: str, code: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, "code": code, **extra}, status_code=status)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(part) for part in loc[1:]] if loc and loc[0] in ("body", "query", "path") else [
        str(part) for part in loc]
    return ".".join(parts) or (str(loc[0]) if loc else "request")


def validation_message(errors: list[Any]) -> tuple[str, list[str]]:
    fields = [_field(error.get("loc", ())) for error in errors]
    lines = [f"{field}: {error.get('msg', 'invalid')}" for field, error in zip(fields, errors, strict=True)]
    return "; ".join(lines)[:500] or "invalid request", sorted(set(fields))


async def _validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    message, fields = validation_message(list(exc.errors()))
    return error_response(400, message, "bad_request", fields=fields)


async def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    message = exc.detail if isinstance(exc.detail, str) else "request refused"
    if status == 404 and message == "Not Found":
        message = f"no route {request.url.path}"
    return error_response(status, message, HTTP_CODES.get(status, "error"))


async def _node_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CrystalmeshError)
    code = getattr(exc, "code", None)
    status = exc.http_status
    if status >= 500:
        log.error("api node error path=%s: %s", request.url.path, exc)
    phase = getattr(exc, "phase", None)  # where a purchase stopped (node.net.progress)
    extra = {"phase": phase} if isinstance(phase, str) else {}
    return error_response(status, str(exc) or type(exc).__name__,
                          code if isinstance(code, str) else "error", **extra)


async def _wire_error(request: Request, exc: Exception) -> Response:
    return error_response(400, str(exc) or type(exc).__name__, "invalid_message")


async def _bug(request: Request, exc: Exception) -> Response:
    # Starlette re-raises after answering; ``node.api.guards`` logs the traceback.
    return error_response(500, "internal error", "internal")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _bug)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(CrystalmeshError, _node_error)
    app.add_exception_handler(InvalidEnvelope, _wire_error)
    app.add_exception_handler(InvalidMessage, _wire_error)

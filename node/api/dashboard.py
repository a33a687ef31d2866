"""The node dashboard: one HTML page, its static assets and a token login.

The page is plain HTML/CSS/JS from ``node/api/static`` (no build step, no CDN)
that polls the JSON API every 2 s. Browsers cannot send ``Authorization``
headers from a link, so logging in starts a session: a random value in an
HttpOnly, SameSite=Strict ``cm_session`` cookie (never the API token), known
to ``node.api.auth.ApiAuth`` until logout or restart. Login is a one-time link
(``crystalmesh dashboard``; it works once, within 60 s) or the API token
typed into the login form.

Why polling and not server-sent events: a stream handler gets only ``send``,
and hypercorn swallows writes to a closed socket, so an SSE loop could not
notice a departed browser and would run on until some time limit. A fetch
every 2 s on loopback costs nothing and ends with its request.
"""

from __future__ import annotations

import hmac
import html
import logging
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs

import trio
from fastapi import APIRouter, Depends, Query, Request
from pydantic import ValidationError
from starlette.responses import JSONResponse, Response

from node.api.auth import SESSION_COOKIE, auth_of, require_auth
from node.api.errors import ApiHttpError, error_response
from node.api.models import LoginIn, LoginLinkQuery

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
LOGIN_CODE_TTL_S = 60
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
}
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_\-.~]{1,256}$")

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
FORM_TYPE = "application/x-www-form-urlencoded"
LOGIN_BODY = {"requestBody": {"content": {
    "application/json": {"schema": LoginIn.model_json_schema()},
    FORM_TYPE: {"schema": LoginIn.model_json_schema()},
}}}


def static_path(name: str) -> Path | None:
    """The file ``name`` in the static dir, or None for anything else (no traversal:
    one plain file name, no dot files, known extensions only, must resolve inside)."""
    if not _SAFE_NAME.match(name) or Path(name).suffix not in CONTENT_TYPES:
        return None
    path = (STATIC_DIR / name).resolve()
    if path.parent != STATIC_DIR or not path.is_file():
        return None
    return path


def _html(body: str, status: int = 200) -> Response:
    headers = {**SECURITY_HEADERS, "content-security-policy": PAGE_CSP}
    return Response(body.encode(), status, headers, CONTENT_TYPES[".html"])


def _redirect(location: str) -> Response:
    return Response(b"", 303, {"location": location, **SECURITY_HEADERS}, "text/plain")


def _set_cookie(response: Response, session: str) -> Response:
    # A session cookie of its own (never the API token): closing the browser logs out.
    response.headers.append(
        "set-cookie", f"{SESSION_COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/")
    return response


def _clear_cookie(response: Response) -> Response:
    response.headers.append(
        "set-cookie", f"{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
    return response


async def _read_static(name: str) -> bytes:
    path = static_path(name)
    if path is None:
        raise ApiHttpError(404, f"no static file {name!r}", "not_found")
    return await trio.Path(path).read_bytes()


async def _login_page(error: str = "", status: int = 200) -> Response:
    page = (await _read_static("login.html")).decode()
    message = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    return _html(page.replace("<!--error-->", message), status)


def _token_matches(token: str, supplied: str) -> bool:
    return bool(_TOKEN_SHAPE.match(supplied)) and hmac.compare_digest(supplied, token)


def _login_body(body: bytes, is_form: bool) -> LoginIn:
    """The login body as its model (the guard has already bounded and checked JSON)."""
    if is_form:
        values = parse_qs(body.decode(errors="replace")).get("token", [""])
        return LoginIn(token=values[0].strip())
    return LoginIn.model_validate_json(body or b"{}")


class LoginCodes:
    """One-time dashboard login codes: each works once, within ``LOGIN_CODE_TTL_S``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._codes: dict[str, float] = {}

    def issue(self) -> str:
        now = self.clock()
        self._codes = {code: expiry for code, expiry in self._codes.items() if expiry > now}
        code = secrets.token_urlsafe(24)
        self._codes[code] = now + LOGIN_CODE_TTL_S
        return code

    def redeem(self, code: str) -> bool:
        expiry = self._codes.pop(code, None)
        return expiry is not None and expiry > self.clock()


def dashboard_router() -> APIRouter:
    """``/dashboard``, its login/logout and ``/dashboard/static/{name}`` (plus the token-guarded
    ``POST /v1/dashboard/login-link``).

    Logging in (a one-time link from ``crystalmesh dashboard``, or the API token typed
    into the login form) starts a session: a random cookie value kept in memory
    (``node.api.auth.ApiAuth``), HttpOnly and SameSite=Strict, ended by logout or a restart.
    """
    codes = LoginCodes()
    router = APIRouter(tags=["dashboard"])

    @router.post("/v1/dashboard/login-link", dependencies=[Depends(require_auth)])
    async def login_link() -> dict[str, Any]:
        return {"path": f"/dashboard/login?code={codes.issue()}", "expires_in_s": LOGIN_CODE_TTL_S}

    @router.get("/dashboard", response_class=Response)
    async def dashboard(request: Request) -> Response:
        if not auth_of(request).authorised(request):
            return await _login_page()
        return _html((await _read_static("dashboard.html")).decode())

    @router.get("/dashboard/login", response_class=Response)
    async def login_by_link(request: Request, query: Annotated[LoginLinkQuery, Query()]) -> Response:
        code = query.code.strip()
        if not code:
            return await _login_page()
        if not codes.redeem(code):
            log.warning("dashboard login refused: unknown, used or expired link")
            return await _login_page("That login link was already used or has expired; "
                                     "run `crystalmesh dashboard` for a new one.", 401)
        return _set_cookie(_redirect("/dashboard"), auth_of(request).start_session())

    @router.post("/dashboard/login", response_class=Response, openapi_extra=LOGIN_BODY)
    async def login(request: Request) -> Response:
        is_form = request.headers.get("content-type", "").startswith(FORM_TYPE)
        try:
            supplied = _login_body(await request.body(), is_form).token.strip()
        except ValidationError:
            supplied = ""
        auth = auth_of(request)
        if not _token_matches(auth.token, supplied):
            log.warning("dashboard login refused: wrong token")
            if is_form:
                return await _login_page("Wrong token. It is in <data dir>/api.token.", 401)
            return error_response(401, "wrong token", "unauthorized")
        if is_form:
            return _set_cookie(_redirect("/dashboard"), auth.start_session())
        return _set_cookie(JSONResponse({"ok": True}), auth.start_session())

    @router.post("/dashboard/logout", response_class=Response)
    async def logout(request: Request) -> Response:
        auth_of(request).end_session(request)
        return _clear_cookie(_redirect("/dashboard"))

    @router.get("/dashboard/static/{name}", response_class=Response)
    async def static(name: str) -> Response:
        body = await _read_static(name)
        return Response(body, 200, dict(SECURITY_HEADERS), CONTENT_TYPES[Path(name).suffix])

    return router

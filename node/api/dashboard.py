"""The node dashboard: one HTML page, its static assets and a token login.

The page is plain HTML/CSS/JS from ``node/api/static`` (no build step, no CDN)
that polls the JSON API every 2 s. Browsers cannot send ``Authorization``
headers from a link, so logging in starts a session: a random value in an
HttpOnly, SameSite=Strict ``cm_session`` cookie (never the API token), known
to ``App`` until logout or restart. Login is a one-time link
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
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import trio

from node.api.app import SESSION_COOKIE, App, HttpError, Request, Response, json_response

if TYPE_CHECKING:
    from node.api.interface import NodeApi

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

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
PAGE_CSP = (
    b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    b"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def static_path(name: str) -> Path | None:
    """The file ``name`` in the static dir, or None for anything else (no traversal:
    one plain file name, no dot files, known extensions only, must resolve inside)."""
    if not _SAFE_NAME.match(name) or Path(name).suffix not in CONTENT_TYPES:
        return None
    path = (STATIC_DIR / name).resolve()
    if path.parent != STATIC_DIR or not path.is_file():
        return None
    return path


def _html(body: str, status: int = 200, extra: list[tuple[bytes, bytes]] | None = None) -> Response:
    headers = [*SECURITY_HEADERS, (b"content-security-policy", PAGE_CSP), *(extra or [])]
    return Response(status, body.encode(), CONTENT_TYPES[".html"], headers)


def _redirect(location: str, extra: list[tuple[bytes, bytes]] | None = None) -> Response:
    return Response(303, b"", "text/plain", [(b"location", location.encode()),
                                             *SECURITY_HEADERS, *(extra or [])])


def _set_cookie(session: str) -> tuple[bytes, bytes]:
    # A session cookie of its own (never the API token): closing the browser logs out.
    return (b"set-cookie",
            f"{SESSION_COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/".encode())


def _clear_cookie() -> tuple[bytes, bytes]:
    return (b"set-cookie",
            f"{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0".encode())


async def _read_static(name: str) -> bytes:
    path = static_path(name)
    if path is None:
        raise HttpError(404, f"no static file {name!r}")
    return await trio.Path(path).read_bytes()


async def _login_page(error: str = "", status: int = 200) -> Response:
    page = (await _read_static("login.html")).decode()
    message = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    return _html(page.replace("<!--error-->", message), status)


def _token_matches(app: App, supplied: str) -> bool:
    return bool(_TOKEN_SHAPE.match(supplied)) and hmac.compare_digest(supplied, app.token)


def _login_token(request: Request) -> str:
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("application/x-www-form-urlencoded"):
        values = parse_qs(request.body.decode(errors="replace")).get("token", [""])
        return values[0].strip()
    token = request.json().get("token")
    return token.strip() if isinstance(token, str) else ""


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


def register_dashboard(app: App, node: NodeApi | None = None) -> None:
    """Add ``/dashboard``, its login/logout and ``/dashboard/static/{name}`` to ``app``.

    Logging in (a one-time link from ``crystalmesh dashboard``, or the API token typed
    into the login form) starts a session: a random cookie value the app keeps in
    memory, HttpOnly and SameSite=Strict, ended by logout or a node restart.
    """
    codes = LoginCodes()

    def start_session() -> str:
        session = secrets.token_urlsafe(32)
        app.sessions.add(session)
        return session

    @app.route("POST", "/v1/dashboard/login-link")
    async def login_link(request: Request) -> Any:
        return {"path": f"/dashboard/login?code={codes.issue()}", "expires_in_s": LOGIN_CODE_TTL_S}

    @app.route("GET", "/dashboard", public=True)
    async def dashboard(request: Request) -> Response:
        if not app._authorised(request):
            return await _login_page()
        return _html((await _read_static("dashboard.html")).decode())

    @app.route("GET", "/dashboard/login", public=True)
    async def login_by_link(request: Request) -> Response:
        code = (request.arg("code") or "").strip()
        if not code:
            return await _login_page()
        if not codes.redeem(code):
            log.warning("dashboard login refused: unknown, used or expired link")
            return await _login_page("That login link was already used or has expired; "
                                     "run `crystalmesh dashboard` for a new one.", 401)
        return _redirect("/dashboard", [_set_cookie(start_session())])

    @app.route("POST", "/dashboard/login", public=True)
    async def login(request: Request) -> Response:
        is_form = request.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded")
        supplied = _login_token(request)
        if not _token_matches(app, supplied):
            log.warning("dashboard login refused: wrong token")
            if is_form:
                return await _login_page("Wrong token. It is in <data dir>/api.token.", 401)
            return json_response({"error": "wrong token", "code": "unauthorized"}, 401)
        if is_form:
            return _redirect("/dashboard", [_set_cookie(start_session())])
        response = json_response({"ok": True})
        response.headers.append(_set_cookie(start_session()))
        return response

    @app.route("POST", "/dashboard/logout", public=True)
    async def logout(request: Request) -> Response:
        session = app.session_of(request)
        if session is not None:
            app.sessions.discard(session)
        return _redirect("/dashboard", [_clear_cookie()])

    @app.route("GET", "/dashboard/static/{name}", public=True)
    async def static(request: Request) -> Response:
        name = request.params["name"]
        body = await _read_static(name)
        return Response(200, body, CONTENT_TYPES[Path(name).suffix], list(SECURITY_HEADERS))

"""The node dashboard: one HTML page, its static assets and a token login.

The page is plain HTML/CSS/JS from ``node/api/static`` (no build step, no CDN)
that polls the JSON API every 2 s. Browsers cannot send ``Authorization``
headers from a link, so logging in trades the API token for an HttpOnly,
SameSite=Strict ``cm_token`` cookie, which ``App`` already accepts.

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
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

import trio

from node.api.app import App, HttpError, Request, Response, json_response

if TYPE_CHECKING:
    from node.api.interface import NodeApi

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
COOKIE_NAME = "cm_token"
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


def _set_cookie(token: str) -> tuple[bytes, bytes]:
    # A session cookie: closing the browser logs out; the CLI prints a fresh link.
    return (b"set-cookie",
            f"{COOKIE_NAME}={token}; HttpOnly; SameSite=Strict; Path=/".encode())


def _clear_cookie() -> tuple[bytes, bytes]:
    return (b"set-cookie",
            f"{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0".encode())


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


def register_dashboard(app: App, node: NodeApi | None = None) -> None:
    """Add ``/dashboard``, its login/logout and ``/dashboard/static/{name}`` to ``app``.

    ``node`` is accepted for symmetry with other extensions; the page reads the node
    through the JSON API, so the routes here need only the app's token.
    """

    @app.route("GET", "/dashboard", public=True)
    async def dashboard(request: Request) -> Response:
        if request.arg("token") is not None:
            # A pasted link with ?token=: trade it for the cookie and drop it from the URL.
            return await login_by_link(request)
        if not app._authorised(request):
            return await _login_page()
        return _html((await _read_static("dashboard.html")).decode())

    @app.route("GET", "/dashboard/login", public=True)
    async def login_by_link(request: Request) -> Response:
        supplied = (request.arg("token") or "").strip()
        if not supplied:
            return await _login_page()
        if not _token_matches(app, supplied):
            log.warning("dashboard login refused: wrong token (link)")
            return await _login_page("That login link is not valid for this node.", 401)
        return _redirect("/dashboard", [_set_cookie(app.token)])

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
            return _redirect("/dashboard", [_set_cookie(app.token)])
        response = json_response({"ok": True})
        response.headers.append(_set_cookie(app.token))
        return response

    @app.route("POST", "/dashboard/logout", public=True)
    async def logout(request: Request) -> Response:
        return _redirect("/dashboard", [_clear_cookie()])

    @app.route("GET", "/dashboard/static/{name}", public=True)
    async def static(request: Request) -> Response:
        name = request.params["name"]
        body = await _read_static(name)
        return Response(200, body, CONTENT_TYPES[Path(name).suffix], list(SECURITY_HEADERS))

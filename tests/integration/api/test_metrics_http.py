"""/metrics and the dashboard routes through the real API app (guard + FastAPI), served by
hypercorn's trio worker on 127.0.0.1 and called over real HTTP."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE

from node.api import dashboard as dashboard_module
from node.api.routes import ApiApp, build_app
from node.crystals.store import CrystalNotFound

TOKEN = "test-token_0123456789abcdef"


class FakeNode:
    """The slice of a NodeApi that /metrics and /v1/peers read (the other routes are not hit)."""

    def __init__(self) -> None:
        self.memory = FakeMemory()

    async def status(self) -> dict[str, Any]:
        return {"name": "node-x", "peer_id": "12D3KooWtest", "uptime_s": 42, "listings_known": 5,
                "weather": {"active": True, "level": 0.8, "remaining_ms": 90_500},
                "reachability": {"status": "private", "reservations": ["r1", "r2"],
                                 "relay": {"serving": False, "reservations": 0, "circuits": 0}}}

    def peers(self) -> list[dict[str, Any]]:
        return [{"peer_id": "a", "connected": True, "banned": False},
                {"peer_id": "b", "connected": False, "banned": True}]

    def rejections(self) -> dict[str, dict[str, int]]:
        raise RuntimeError("secret detail of a bug in /srv/node.py")



class FakeMemory:
    def __init__(self) -> None:
        self.totals = {"total": 3, "by_lifecycle": {"generated": 2, "consolidated": 1},
                       "by_type": {"skill": 1, "general": 2}}

    async def stats(self) -> dict[str, Any]:
        return self.totals

    async def detail(self, crystal_id: str) -> dict[str, Any]:
        raise CrystalNotFound(crystal_id)


class Served:
    def __init__(self, app: ApiApp, port: int) -> None:
        self.app = app
        self.port = port


@pytest.fixture
async def app(nursery: trio.Nursery) -> AsyncIterator[Served]:
    api = build_app(cast(Any, FakeNode()), TOKEN)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.5
    binds = await nursery.start(serve, api, config)
    port = int(binds[0].rsplit(":", 1)[1])
    api.bind("127.0.0.1", port)
    yield Served(api, port)
    nursery.cancel_scope.cancel()


def _raw(port: int, method: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close",
             f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall("\r\n".join(lines).encode() + b"\r\n\r\n" + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


async def call(app: Served, method: str, path: str, *, query: str = "", body: bytes = b"",
               headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request over a fresh connection, path sent as written (no client normalising)."""
    target = path + (f"?{query}" if query else "")
    raw = await trio.to_thread.run_sync(_raw, app.port, method, target, body, headers or {})
    head, _, payload = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    response_headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        # set-cookie may repeat; these tests set at most one.
        response_headers[name.strip().lower()] = value.strip()
    if response_headers.get("transfer-encoding") == "chunked":
        payload = _unchunk(payload)
    return int(status_line.split()[1]), response_headers, payload


def _unchunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return out


async def test_metrics_is_public_and_prometheus_text(app: Served) -> None:
    status, headers, body = await call(app, "GET", "/metrics")
    assert status == 200
    assert headers["content-type"] == CONTENT_TYPE
    text = body.decode()
    assert "# TYPE crystalmesh_gossip_messages_total counter" in text
    assert 'crystalmesh_crystals{lifecycle="generated"} 2.0' in text
    assert 'crystalmesh_crystals_by_type{type="skill"} 1.0' in text
    assert 'crystalmesh_peers{state="connected"} 1.0' in text
    assert 'crystalmesh_peers{state="banned"} 1.0' in text
    assert "crystalmesh_weather_active 1.0" in text
    assert "crystalmesh_weather_level 0.8" in text
    assert "crystalmesh_weather_remaining_seconds 90.5" in text
    assert "crystalmesh_listings_known 5.0" in text
    assert 'crystalmesh_reachability{state="private"} 1.0' in text
    assert 'crystalmesh_reachability{state="public"} 0.0' in text
    assert 'crystalmesh_relay_reservations{role="held"} 2.0' in text


async def test_dashboard_without_token_shows_login(app: Served) -> None:
    status, headers, body = await call(app, "GET", "/dashboard")
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    assert b'data-testid="login-page"' in body
    assert b"dashboard.js" not in body
    assert "script-src 'self'" in headers["content-security-policy"]


async def login_link(app: Served) -> str:
    status, _, body = await call(app, "POST", "/v1/dashboard/login-link",
                                 headers={"authorization": f"Bearer {TOKEN}"})
    assert status == 200
    return json.loads(body)["path"].split("code=", 1)[1]


async def session_from_link(app: Served) -> str:
    status, headers, _ = await call(app, "GET", "/dashboard/login", query=f"code={await login_link(app)}")
    assert status == 303 and headers["location"] == "/dashboard"
    cookie = headers["set-cookie"]
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
        assert attribute in cookie
    return cookie.split(";", 1)[0].split("=", 1)[1]


async def test_dashboard_with_session_or_bearer_shows_dashboard(app: Served) -> None:
    session = await session_from_link(app)
    assert session != TOKEN and TOKEN not in session  # the cookie is never the API token
    for auth in ({"cookie": f"other=1; cm_session={session}"}, {"authorization": f"Bearer {TOKEN}"}):
        status, headers, body = await call(app, "GET", "/dashboard", headers=auth)
        assert status == 200
        assert headers["content-type"] == "text/html; charset=utf-8"
        assert b'data-testid="peers-table"' in body
    for cookie in ("cm_session=wrong-but-long-enough-value", f"cm_token={TOKEN}"):
        status, _, body = await call(app, "GET", "/dashboard", headers={"cookie": cookie})
        assert status == 200 and b'data-testid="login-page"' in body


async def test_login_link_works_once_and_expires(app: Served) -> None:
    """Issue 12 row 8: the one-time link worked three times and its cookie was the token."""
    code = await login_link(app)
    status, headers, _ = await call(app, "GET", "/dashboard/login", query=f"code={code}")
    assert status == 303 and headers["set-cookie"].startswith("cm_session=")
    again, headers, body = await call(app, "GET", "/dashboard/login", query=f"code={code}")
    assert again == 401 and "set-cookie" not in headers and b"already used" in body
    status, _, _ = await call(app, "GET", "/dashboard/login", query=f"token={TOKEN}")
    assert status == 200  # the old ?token= link only shows the login page now

    codes = dashboard_module.LoginCodes(clock=lambda: now[0])
    now = [1000.0]
    late = codes.issue()
    now[0] += dashboard_module.LOGIN_CODE_TTL_S + 1
    assert not codes.redeem(late)


async def test_token_in_query_string_is_not_accepted(app: Served) -> None:
    status, _, _ = await call(app, "GET", "/v1/peers", query=f"token={TOKEN}")
    assert status == 401


async def test_login_post_json_and_form(app: Served) -> None:
    status, headers, body = await call(app, "POST", "/dashboard/login",
                                       body=json.dumps({"token": TOKEN}).encode(),
                                       headers={"content-type": "application/json"})
    assert status == 200 and json.loads(body) == {"ok": True}
    assert headers["set-cookie"].startswith("cm_session=")
    assert TOKEN not in headers["set-cookie"]

    form = {"content-type": "application/x-www-form-urlencoded"}
    status, headers, _ = await call(app, "POST", "/dashboard/login",
                                    body=f"token={TOKEN}".encode(), headers=form)
    assert status == 303 and headers["location"] == "/dashboard"

    status, headers, body = await call(app, "POST", "/dashboard/login", body=b"token=wrong",
                                       headers=form)
    assert status == 401 and "set-cookie" not in headers and b"Wrong token" in body
    status, headers, body = await call(app, "POST", "/dashboard/login",
                                       body=b'{"token": "wrong"}',
                                       headers={"content-type": "application/json"})
    assert status == 401 and "set-cookie" not in headers
    assert json.loads(body)["code"] == "unauthorized"


async def test_logout_revokes_the_session(app: Served) -> None:
    session = await session_from_link(app)
    status, headers, _ = await call(app, "POST", "/dashboard/logout",
                                    headers={"cookie": f"cm_session={session}"})
    assert status == 303 and "Max-Age=0" in headers["set-cookie"]
    status, _, body = await call(app, "GET", "/dashboard", headers={"cookie": f"cm_session={session}"})
    assert b'data-testid="login-page"' in body


@pytest.mark.parametrize(("name", "content_type"), [
    ("dashboard.js", "text/javascript; charset=utf-8"),
    ("dashboard.css", "text/css; charset=utf-8"),
    ("dashboard.html", "text/html; charset=utf-8"),
])
async def test_static_files_have_their_content_types(app: Served, name: str, content_type: str) -> None:
    status, headers, body = await call(app, "GET", f"/dashboard/static/{name}")
    assert status == 200
    assert headers["content-type"] == content_type
    assert headers["x-content-type-options"] == "nosniff"
    assert body == (dashboard_module.STATIC_DIR / name).read_bytes()


@pytest.mark.parametrize("path", [
    "/dashboard/static/../app.py",
    "/dashboard/static/..%2Fapp.py",
    "/dashboard/static/..",
    "/dashboard/static/.hidden.js",
    "/dashboard/static/%2e%2e/app.py",
    "/dashboard/static//etc/passwd",
    "/dashboard/static/dashboard.py",
    "/dashboard/static/missing.js",
    "/dashboard/static/sub/dashboard.js",
])
async def test_static_refuses_traversal_and_unknown_files(app: Served, path: str) -> None:
    status, _, body = await call(app, "GET", path)
    assert status == 404
    assert b"import" not in body and b"root:" not in body


def test_static_path_only_resolves_inside_the_static_dir() -> None:
    assert dashboard_module.static_path("dashboard.js") is not None
    for name in ("../app.py", "..", ".", "", "a/b.js", "/etc/passwd", "dashboard.js\x00.css",
                 "..\\app.py", "app.py"):
        assert dashboard_module.static_path(name) is None, name


async def test_json_api_still_needs_the_token(app: Served) -> None:
    status, _, _ = await call(app, "GET", "/v1/peers")
    assert status == 401
    status, _, _ = await call(app, "GET", "/v1/peers", headers={"cookie": f"cm_token={TOKEN}"})
    assert status == 401
    session = await session_from_link(app)
    status, _, _ = await call(app, "GET", "/v1/peers", headers={"cookie": f"cm_session={session}"})
    assert status == 200


async def test_errors_are_mapped_by_type_and_a_bug_shows_no_detail(app: Served) -> None:
    bearer = {"authorization": f"Bearer {TOKEN}"}
    status, headers, body = await call(app, "GET", "/v1/crystals/abc", headers=bearer)
    assert status == 404 and json.loads(body) == {"error": str(CrystalNotFound("abc")),
                                                  "code": "not_found"}
    status, headers, body = await call(app, "GET", "/v1/rejections", headers=bearer)
    assert status == 500 and json.loads(body) == {"error": "internal error", "code": "internal"}
    assert headers["content-type"] == "application/json"
    status, _, body = await call(app, "GET", "/v1/nowhere", headers=bearer)
    assert status == 404 and json.loads(body)["code"] == "not_found"
    status, _, body = await call(app, "DELETE", "/v1/peers", headers=bearer)
    assert status == 405 and json.loads(body)["code"] == "method_not_allowed"
    status, _, _ = await call(app, "GET", "/v1/peers", headers=bearer)
    assert status == 200  # still serving

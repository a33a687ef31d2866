"""Who may call the API: the bearer token, or a live dashboard session cookie.

The API token is accepted only as ``Authorization: Bearer`` (never in a query
string or cookie). Browsers cannot send that header from a link, so the
dashboard starts a session instead: a random value in an HttpOnly,
SameSite=Strict ``cm_session`` cookie (never the token), held in memory here
until logout or restart (``node/api/dashboard.py``).
"""

from __future__ import annotations

import hmac
import re
import secrets

from fastapi import Request

from node.api.errors import ApiHttpError

SESSION_COOKIE = "cm_session"
_SESSION_SHAPE = re.compile(r"^[A-Za-z0-9_-]{20,100}$")


class ApiAuth:
    def __init__(self, token: str) -> None:
        self.token = token
        self.sessions: set[str] = set()

    def token_matches(self, supplied: str) -> bool:
        return bool(supplied) and hmac.compare_digest(supplied.encode(), self.token.encode())

    def bearer_ok(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        supplied = header[7:] if header.lower().startswith("bearer ") else ""
        return self.token_matches(supplied)

    def session_of(self, request: Request) -> str | None:
        """The dashboard session named by the request's cookie, if it is a live one."""
        value = request.cookies.get(SESSION_COOKIE, "")
        if not _SESSION_SHAPE.match(value):
            return None
        return value if any(hmac.compare_digest(value, live) for live in self.sessions) else None

    def authorised(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer ") and header[7:]:
            return self.bearer_ok(request)
        return self.session_of(request) is not None

    def start_session(self) -> str:
        session = secrets.token_urlsafe(32)
        self.sessions.add(session)
        return session

    def end_session(self, request: Request) -> None:
        session = self.session_of(request)
        if session is not None:
            self.sessions.discard(session)


def auth_of(request: Request) -> ApiAuth:
    auth = request.app.state.auth
    assert isinstance(auth, ApiAuth)
    return auth


async def require_auth(request: Request) -> None:
    """Router dependency: the bearer token or a live dashboard session, else 401."""
    if not auth_of(request).authorised(request):
        raise ApiHttpError(401, "missing or wrong API token", "unauthorized")

"""Client for a running node's local HTTP API (used by the CLI and the devnet tools)."""

from __future__ import annotations

import os
from typing import Any

import httpx

from node.config import NodeConfig
from node.keyfiles import read_secret


class ApiError(RuntimeError):
    """The node answered with an error, or could not be reached."""

    def __init__(self, message: str, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); look at its state.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


class ApiClient:
    def __init__(self, base_url: str, token: str, timeout_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._client = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, path: str, json: Any = None, params: Any = None) -> Any:
        try:
            response = self._client.request(method, path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach the node at {self.base_url}: {exc}") from exc
        try:
            data = response.json()
        except ValueError:
            data = {"error": response.text[:200]}
        if response.status_code >= 400:
            message = data.get("error") if isinstance(data, dict) else str(data)
            code = data.get("code", "") if isinstance(data, dict) else ""
            raise ApiError(str(message), response.status_code, str(code))
        return data

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json=body or {})


def api_base_url(config: NodeConfig) -> str | None:
    try:
        port = int(config.api_port_path.read_text().strip())
    except (OSError, ValueError):
        return None
    return f"http://{config.api.host}:{port}"


def running_node(config: NodeConfig, timeout_s: float = 60.0) -> ApiClient | None:
    """A client for the node on this data dir if its process is alive, else None."""
    try:
        pid = int(config.pid_path.read_text().strip())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid):
        return None
    base = api_base_url(config)
    if base is None:
        return None
    token = read_secret(config.api_token_path).decode().strip()
    return ApiClient(base, token, timeout_s)

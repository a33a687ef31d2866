"""Creating a node's data dir: config, keys, token. Idempotent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from node.chain import load_or_create_wallet
from node.config import load_config, save_config
from node.keys import load_or_create_api_token, load_or_create_identity


def init_node(
    data_dir: Path,
    *,
    name: str | None = None,
    embedder: str | None = None,
    listen: str | None = None,
    api_port: int | None = None,
    bootstrap: list[str] | None = None,
    management_keys: list[str] | None = None,
    chain: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Create (or complete) the data dir; explicit arguments overwrite node.toml settings."""
    data_dir = Path(data_dir).expanduser()
    created = not (data_dir / "node.toml").exists()
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)
    config = load_config(data_dir)
    if name:
        config.name = name
    elif created:
        config.name = data_dir.name
    if embedder:
        config.memory.embedder = embedder
    if listen:
        config.net.listen = listen
    if api_port is not None:
        config.api.port = api_port
    if bootstrap is not None:
        config.net.bootstrap = bootstrap
    if management_keys is not None:
        config.net.management_keys = [key.lower() for key in management_keys]
    for key, value in (chain or {}).items():
        setattr(config.chain, key, value)
    save_config(config)
    identity = load_or_create_identity(config)
    wallet = load_or_create_wallet(config.wallet_path)
    load_or_create_api_token(config)
    return {
        "created": created,
        "name": config.name,
        "data_dir": str(config.data_dir),
        "peer_id": identity.peer_id,
        "public_key": identity.public_key.hex(),
        "wallet_address": wallet.address,
        "embedder": config.memory.embedder,
    }

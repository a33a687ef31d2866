"""The node's keys on disk: the Ed25519 identity (libp2p peer id + envelope
signing) and the local API bearer token. Both are 0600 secret files."""

from __future__ import annotations

import secrets

from node.config import NodeConfig
from node.keyfiles import KeyFileError, read_secret, write_secret
from protocol.identity import Identity


def load_identity(config: NodeConfig) -> Identity:
    raw = read_secret(config.identity_path).strip()
    try:
        seed = bytes.fromhex(raw.decode())
    except ValueError as exc:
        raise KeyFileError(f"{config.identity_path} is not a hex Ed25519 seed") from exc
    if len(seed) != 32:
        raise KeyFileError(f"{config.identity_path} must hold a 32-byte seed, found {len(seed)}")
    return Identity.from_seed(seed)


def load_or_create_identity(config: NodeConfig) -> Identity:
    if config.identity_path.exists():
        return load_identity(config)
    identity = Identity.generate()
    write_secret(config.identity_path, identity.seed.hex().encode() + b"\n")
    return identity


def load_or_create_api_token(config: NodeConfig) -> str:
    if config.api_token_path.exists():
        return read_secret(config.api_token_path).decode().strip()
    token = secrets.token_urlsafe(32)
    write_secret(config.api_token_path, token.encode() + b"\n")
    return token

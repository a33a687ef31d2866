"""One typed configuration object per node.

Values come, lowest precedence first, from the defaults written here, the
data dir's ``node.toml``, ``CRYSTALMESH_<SECTION>_<KEY>`` environment
variables, and finally explicit overrides (CLI flags).

Each default is written here once: the concepts' formulas take theirs from these
classes (``pricing.DEFAULT_MIN_MICRO_USDC`` is ``MarketConfig.min_price_micro_usdc``,
``levels.DEFAULT_THRESHOLDS`` the ``TrustConfig`` thresholds, ...), since this module
sits below every concept and imports none of them.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints

from node.errors import CrystalmeshError
from protocol.topics import DEFAULT_NETWORK, InvalidNetwork, network_kind


def crystalmesh_home() -> Path:
    """Where data dirs and devnets live by default: $CRYSTALMESH_HOME or ~/.crystalmesh."""
    return Path(os.environ.get("CRYSTALMESH_HOME", Path.home() / ".crystalmesh")).expanduser()

BASE_SEPOLIA_CHAIN_ID = 84532
BASE_SEPOLIA_USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
BASE_MAINNET_CHAIN_ID = 8453
BASE_MAINNET_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"

# What ``chain.chain_id`` / ``chain.token_address`` default to on each kind of network
# (``net.network``). A devnet runs a local chain with Base Sepolia's id; ``devnet up``
# writes the address of the token it deployed.
CHAIN_DEFAULTS: dict[str, tuple[int, str]] = {
    "devnet": (BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC),
    "testnet": (BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC),
    "mainnet": (BASE_MAINNET_CHAIN_ID, BASE_MAINNET_USDC),
}


class ConfigError(CrystalmeshError, ValueError):
    """node.toml or an override is malformed."""


@dataclass
class NetConfig:
    # devnet (default), testnet, mainnet, or devnet-<name> / testnet-<name>: part of every
    # topic and protocol id, so nodes of two networks never exchange a message; the chain
    # id and token address default from it (CHAIN_DEFAULTS).
    network: str = DEFAULT_NETWORK
    listen: str = "/ip4/127.0.0.1/tcp/0"
    bootstrap: list[str] = field(default_factory=list)
    # Ed25519 public keys (hex) whose weather alerts are obeyed and who are pre-trusted.
    management_keys: list[str] = field(default_factory=list)
    heartbeat_s: float = 1.0
    clock_window_s: int = 120
    max_weather_duration_s: int = 3600
    reconnect_max_backoff_s: float = 30.0
    # Find peers beyond ``bootstrap`` (Kademlia DHT random walks, node/net/discovery.py).
    discovery: bool = True
    # Listing shards (node/net/shards.py): 0 keeps every listing on the one /1/skills topic
    # (every node receives every listing: fine for a devnet); S (a power of two, the same on
    # every node of the network) puts each listing on the shard topic of its category, and a
    # node follows only the shards of market.interests and of what it sells.
    listing_shards: int = 0
    # With shards on, also publish on /1/skills, for old nodes of the network that read only it.
    listing_legacy_publish: bool = False
    # Gossip accepted per origin key and topic (node/net/rules/validation.py): a token bucket refilled
    # at ``*_per_min`` and holding ``*_burst``. A seller announcing its catalogue fits the burst,
    # a flood from one key does not (issue 11); listings sync has its own, larger limits.
    origin_listings_per_min: float = 10.0
    origin_listings_burst: int = 30
    # A node reports at most every trust.report_interval_s (10 s; far less often in a large
    # network, node/trust/cadence.py) and only its latest report counts.
    origin_trust_reports_per_min: float = 120.0
    origin_trust_reports_burst: int = 120
    origin_bounties_per_min: float = 5.0
    origin_bounties_burst: int = 10
    # Reachability (node/net/reach/reachability.py; docs/operations.md, "Reachability and relays").
    # Offer circuit relay v2 to private peers: "auto" (while AutoNAT says we are public),
    # "on" or "off". A private node holds reservations on ``relay_reservations`` relays.
    relay_service: str = "auto"
    relay_reservations: int = 2
    # What one relay gives (node/net/reach/relay.py): reservations in all and per IP address,
    # circuits in all and per peer, each circuit's lifetime and bytes, hop requests per
    # peer and minute (a peer looping on RESERVE or CONNECT is refused beyond it).
    relay_max_reservations: int = 128
    relay_max_reservations_per_ip: int = 8
    relay_reservation_ttl_s: int = 900
    relay_max_circuits: int = 64
    relay_max_circuits_per_peer: int = 8
    relay_circuit_duration_s: int = 300
    relay_circuit_bytes: int = 8 * 1024 * 1024
    relay_hop_per_minute: float = 30.0
    # Upgrade relayed connections to direct ones (DCUtR hole punching, reverse dials).
    hole_punching: bool = True
    # AutoNAT servers that must agree before the status flips (fewer if fewer are connected).
    autonat_confirmations: int = 2


@dataclass
class ApiConfig:
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port, written to <data dir>/api.port


@dataclass
class X402Config:
    """The x402 HTTP endpoint selling this node's listings (unauthenticated, docs/operations.md)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 0  # 0: any free port; the URL is ``x402_url`` in status


@dataclass
class MemoryConfig:
    embedder: str = "minilm"  # one of embedder.EMBEDDER_NAMES: "minilm" (default), "mpnet" (opt-in), "hashing" (tests)
    # A second encoder re-scores the dense candidates (node/memory/search/second_opinion.py): "auto" gives
    # minilm the 3-layer paraphrase-MiniLM-L3 ("l3") and mpnet the MiniLM-L6; "none" turns it off.
    second_opinion: str = "auto"
    hnsw_ef_search: int = 100
    hnsw_m: int = 16
    hnsw_ef_construction: int = 200
    consolidation_interval_s: int = 1800
    decay_rate: float = 5e-10
    promote_threshold: float = 0.7
    forget_threshold: float = 0.02
    merge_overlap_threshold: float = 0.92
    emotion_decay_resistance: float = 0.5
    # seed 003/004 (docs/memory.md): what expires a crystal, facts, confidence, testament
    policy: str = "importance"  # "importance" (seed 000) or "energy" (seed 004 tiers)
    fact_similarity: float = 0.7
    replay_batch: int = 256
    replay_recent_fraction: float = 0.7
    confidence_tau_days: float = 7.0
    min_confidence: float = 0.2
    testament_min_confidence: float = 0.5
    testament_top_episodes: int = 256
    # working memory (seed 001): dream cycle and its synthesiser
    dream_interval_s: int = 7200
    min_chunks_for_dream: int = 5
    dream_synthesiser: str = "extractive"  # "extractive" (offline) or "llm"
    dream_llm_url: str = ""  # OpenAI-compatible base URL, e.g. http://127.0.0.1:11434/v1
    dream_llm_model: str = ""
    dream_llm_key_env: str = ""  # name of the environment variable holding the API key
    dream_llm_timeout_s: float = 60.0
    # Optional LLM stage of search (node/memory/search/llm_stage.py): off unless llm_url is set
    # and llm_hyde or llm_rerank is on. Any OpenAI-compatible endpoint; the key, if any,
    # comes from $CRYSTALMESH_LLM_API_KEY only.
    llm_url: str = ""
    llm_model: str = ""
    llm_hyde: bool = False
    llm_rerank: bool = False
    llm_timeout_s: float = 10.0
    # Files and folders a running node keeps indexed (node/memory/files; docs/memory.md "Files"):
    # re-synced at start and every index_interval_s (an unchanged tree costs one walk and one
    # query), into index_namespace; a file over index_max_file_bytes is skipped (512 KiB: one file
    # must fit one API request from `memory index` beside a node; bigger text is mostly generated).
    index_paths: list[str] = field(default_factory=list)
    index_interval_s: int = 60
    index_namespace: str = "default"
    index_max_file_bytes: int = 512 * 1024


@dataclass
class ChainConfig:
    rpc_url: str = "http://127.0.0.1:8545"
    chain_id: int = BASE_SEPOLIA_CHAIN_ID
    token_address: str = BASE_SEPOLIA_USDC
    settler_address: str = ""
    batch_max_size: int = 50
    batch_max_delay_ms: int = 200
    confirmations: int = 1


@dataclass
class MarketConfig:
    base_price_micro_usdc: int = 10_000
    min_price_micro_usdc: int = 1_000
    max_price_micro_usdc: int = 1_000_000
    max_per_purchase_micro_usdc: int = 500_000
    max_per_day_micro_usdc: int = 2_000_000
    min_executions: int = 3
    min_success_rate: float = 0.6
    listing_ttl_s: int = 86_400
    purchase_timeout_s: float = 30.0
    # A seller's node re-announces each live listing when its last announcement is this old.
    listing_refresh_s: int = 3_600
    # Cosine similarity at which a listing answers a bounty (bountyMatches in the price).
    bounty_match_threshold: float = 0.5
    bounty_ttl_s: int = 3 * 86_400
    # Categories whose listing shards this node follows ("*": all); only with net.listing_shards.
    interests: list[str] = field(default_factory=lambda: ["*"])
    # With shards on, a search that finds fewer than this many listings in the local book asks
    # the network (DHT provider records of the query's terms, then listings sync from them).
    network_search_min_results: int = 3
    network_search_timeout_s: float = 5.0
    network_search_sellers: int = 5
    # x402 batch-settlement (docs/protocol.md, "Vouchers"): pay sellers that take vouchers from
    # a channel per seller; the first purchase deposits this much (refundable; at least the
    # price), so a buyer's money at one seller is bounded by it.
    vouchers: bool = True
    channel_deposit_micro_usdc: int = 1_000_000
    # How long a withdrawal of an unrefunded deposit waits on chain (x402: 15 min to 30 days):
    # the seller's time to claim what it is owed if the buyer leaves.
    channel_withdraw_delay_s: int = 86_400
    # A seller re-reads a channel's balance / withdrawal from the chain at most this often.
    channel_state_ttl_s: float = 60.0
    # The least deposit a seller submits for a buyer (it pays the deposit's gas): a stranger
    # cannot make it open many tiny channels at its expense.
    channel_min_deposit_micro_usdc: int = 100_000
    # A seller claims a buyer's vouchers when their unclaimed sum passes the bound for that
    # buyer's trust level, when the oldest is claim_max_age_s old, or at once when the buyer
    # asks to withdraw; it looks every claim_interval_s (far below any withdraw delay).
    claim_interval_s: float = 60.0
    claim_max_age_s: float = 3_600.0
    claim_bound_trusted_micro_usdc: int = 1_000_000
    claim_bound_provisional_micro_usdc: int = 100_000
    claim_bound_untrusted_micro_usdc: int = 0


@dataclass
class TrustConfig:
    untrusted_below: float = 0.3
    provisional_below: float = 0.6
    trusted_below: float = 0.85
    alpha: float = 0.15
    epsilon: float = 1e-6
    max_iterations: int = 100
    # Trust report cadence (node/trust/cadence.py): at most one report per
    # clamp(N / report_target_per_s, report_interval_s, report_max_interval_s) seconds for a
    # network of N nodes, so each node receives ~report_target_per_s reports a second at any
    # size; an unchanged row (L1 change < report_change_ppm) only every report_refresh_s.
    report_interval_s: float = 10.0
    report_target_per_s: float = 1.0
    report_max_interval_s: float = 7 * 86_400.0
    report_refresh_s: float = 1800.0
    report_change_ppm: int = 50_000
    report_startup_reports: int = 3
    # Receivers keep a report max(report_max_age_s, 3 × the refresh interval).
    report_max_age_s: int = 600
    ban_after_offences: int = 3


@dataclass
class BackupConfig:
    """Scheduled backups (node/ops/schedule.py; docs/operations.md, "Backup and restore")."""

    every_hours: float = 0.0  # 0: off
    keep: int = 7  # the newest backups kept in ``directory``; older ones are deleted
    directory: str = ""  # empty: <data dir>/../<name>-backups (off the data dir's disk is better)
    # The environment variable holding the passphrase (not CRYSTALMESH_*: those are settings).
    passphrase_env: str = "CM_BACKUP_PASSPHRASE"


@dataclass
class ScanConfig:
    """The skill scanner's optional judge (node/market/scan/judge.py; docs/skills-safety.md):
    an OpenAI-compatible chat-completions endpoint asked for a second opinion by
    ``crystalmesh skill scan --judge`` and the API's skill scan route with ``"judge": true``. The
    key comes from the environment variable named by ``judge_key_env`` or from the 0600 file
    ``judge_key_file``, never from this file."""

    judge_url: str = ""  # base URL, e.g. http://127.0.0.1:11434/v1 ("" : no endpoint judge)
    judge_model: str = ""
    judge_key_env: str = ""
    judge_key_file: str = ""
    judge_timeout_s: float = 60.0  # the whole answer, not each read


@dataclass
class NodeConfig:
    name: str = "default"
    data_dir: Path = field(default_factory=lambda: crystalmesh_home() / "default")
    net: NetConfig = field(default_factory=NetConfig)
    api: ApiConfig = field(default_factory=ApiConfig)
    x402: X402Config = field(default_factory=X402Config)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    chain: ChainConfig = field(default_factory=ChainConfig)
    market: MarketConfig = field(default_factory=MarketConfig)
    trust: TrustConfig = field(default_factory=TrustConfig)
    backup: BackupConfig = field(default_factory=BackupConfig)
    scan: ScanConfig = field(default_factory=ScanConfig)

    # --- well-known files in the data dir -------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.data_dir / "node.toml"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "crystals.db"

    @property
    def index_path(self) -> Path:
        return self.data_dir / "index.hnsw"

    @property
    def identity_path(self) -> Path:
        return self.data_dir / "identity.key"

    @property
    def wallet_path(self) -> Path:
        return self.data_dir / "wallet.key"

    @property
    def api_token_path(self) -> Path:
        return self.data_dir / "api.token"

    @property
    def api_port_path(self) -> Path:
        return self.data_dir / "api.port"

    @property
    def peers_path(self) -> Path:
        """The last good peers (node/net/saved_peers.py), dialled on start."""
        return self.data_dir / "peers.json"

    @property
    def pid_path(self) -> Path:
        return self.data_dir / "node.pid"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "node.log"

    @property
    def audit_path(self) -> Path:
        """The operator's append-only audit log (node/audit.py)."""
        return self.data_dir / "audit.jsonl"

    @property
    def backup_dir(self) -> Path:
        """Where scheduled backups go (``backup.directory``, else beside the data dir)."""
        if self.backup.directory:
            return Path(self.backup.directory).expanduser()
        return self.data_dir.parent / f"{self.data_dir.name}-backups"


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    kind = annotation if isinstance(annotation, type) else None
    text = str(annotation)
    try:
        if kind is bool or text == "bool":
            if isinstance(value, str):
                return value.strip().lower() in {"1", "true", "yes", "on"}
            return bool(value)
        if kind is int or text == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError("not an integer")
            return int(value)
        if kind is float or text == "float":
            return float(value)
        if text.startswith("list"):
            if isinstance(value, str):
                return [item.strip() for item in value.split(",") if item.strip()]
            return [str(item) for item in value]
        if kind is Path or "Path" in text:
            return Path(value).expanduser()
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: cannot use {value!r} ({exc})") from exc


def _apply(target: Any, values: dict[str, Any], where: str) -> None:
    hints = get_type_hints(type(target))
    known = {f.name for f in fields(target)}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"{where}: unknown setting {key!r}")
        current = getattr(target, key)
        if is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}.{key}: expected a table")
            _apply(current, value, f"{where}.{key}")
        else:
            setattr(target, key, _coerce(value, hints[key], f"{where}.{key}"))


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sections = {f.name for f in fields(NodeConfig) if f.name not in {"name", "data_dir"}}
    for name, value in environ.items():
        if not name.startswith("CRYSTALMESH_") or name == "CRYSTALMESH_HOME":
            continue
        rest = name[len("CRYSTALMESH_") :].lower()
        section, _, key = rest.partition("_")
        if section in sections and key:
            out.setdefault(section, {})[key] = value
    return out


def load_config(
    data_dir: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> NodeConfig:
    """Build the config for the node living in ``data_dir``."""
    config = NodeConfig()
    if data_dir is not None:
        config.data_dir = Path(data_dir).expanduser()
    sources: list[dict[str, Any]] = []
    if config.config_path.exists():
        try:
            values = tomllib.loads(config.config_path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{config.config_path}: {exc}") from exc
        values.pop("data_dir", None)
        _apply(config, values, str(config.config_path))
        sources.append(values)
    env = _env_overrides(dict(environ if environ is not None else os.environ))
    _apply(config, env, "env")
    sources.append(env)
    if overrides:
        _apply(config, overrides, "override")
        sources.append(overrides)
    _apply_network(config, sources)
    return config


def _set_in(sources: list[dict[str, Any]], section: str, key: str) -> bool:
    return any(isinstance(source.get(section), dict) and key in source[section] for source in sources)


def _apply_network(config: NodeConfig, sources: list[dict[str, Any]]) -> None:
    """Check ``net.network``; fill the chain id and token address it implies unless set.

    A chain id that contradicts the network is refused: test money never goes to
    Base mainnet and a mainnet node never settles on a test chain.
    """
    try:
        kind = network_kind(config.net.network)
    except InvalidNetwork as exc:
        raise ConfigError(f"net.network: {exc}") from exc
    chain_id, token_address = CHAIN_DEFAULTS[kind]
    if not _set_in(sources, "chain", "chain_id"):
        config.chain.chain_id = chain_id
    if not _set_in(sources, "chain", "token_address"):
        config.chain.token_address = token_address
    on_mainnet_chain = config.chain.chain_id == BASE_MAINNET_CHAIN_ID
    if (kind == "mainnet") != on_mainnet_chain:
        raise ConfigError(
            f"net.network = {config.net.network!r} with chain.chain_id = {config.chain.chain_id}: "
            f"mainnet settles on Base ({BASE_MAINNET_CHAIN_ID}) and only mainnet does"
        )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    # JSON string escapes are valid TOML basic-string escapes; TOML also forbids a raw DEL.
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def dump_config(config: NodeConfig) -> str:
    """Serialise to TOML (every setting, so node.toml documents itself)."""
    lines = [f"name = {_toml_value(config.name)}", ""]
    for section in fields(config):
        value = getattr(config, section.name)
        if not is_dataclass(value):
            continue
        lines.append(f"[{section.name}]")
        for item in fields(value):
            lines.append(f"{item.name} = {_toml_value(getattr(value, item.name))}")
        lines.append("")
    return "\n".join(lines)


def save_config(config: NodeConfig) -> None:
    config.data_dir.mkdir(parents=True, exist_ok=True)
    config.config_path.write_text(dump_config(config))

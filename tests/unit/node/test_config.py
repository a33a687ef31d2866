"""NodeConfig: defaults < node.toml < CRYSTALMESH_<SECTION>_<KEY> env < overrides."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.config import (
    BASE_MAINNET_CHAIN_ID,
    BASE_MAINNET_USDC,
    BASE_SEPOLIA_CHAIN_ID,
    BASE_SEPOLIA_USDC,
    ConfigError,
    NodeConfig,
    dump_config,
    load_config,
    save_config,
)


def test_defaults_without_a_node_toml(tmp_path: Path) -> None:
    config = load_config(tmp_path, environ={})
    assert config.data_dir == tmp_path
    assert config.name == "default"
    assert config.memory.embedder == "minilm"
    assert config.memory.hnsw_ef_search == 100
    assert config.chain.chain_id == BASE_SEPOLIA_CHAIN_ID
    assert config.net.bootstrap == []
    assert config.db_path == tmp_path / "crystals.db"
    assert config.index_path == tmp_path / "index.hnsw"
    assert asdict(config) == asdict(NodeConfig(data_dir=tmp_path))


def test_node_toml_values_are_read(tmp_path: Path) -> None:
    (tmp_path / "node.toml").write_text(
        'name = "alice"\n'
        "[memory]\n"
        'embedder = "hashing"\n'
        "hnsw_ef_search = 64\n"
        "decay_rate = 1e-9\n"
        "[net]\n"
        'bootstrap = ["/ip4/1.2.3.4/tcp/1", "/ip4/5.6.7.8/tcp/2"]\n'
    )
    config = load_config(tmp_path, environ={})
    assert config.name == "alice"
    assert config.memory.embedder == "hashing"
    assert config.memory.hnsw_ef_search == 64
    assert config.memory.decay_rate == 1e-9
    assert config.net.bootstrap == ["/ip4/1.2.3.4/tcp/1", "/ip4/5.6.7.8/tcp/2"]
    assert config.memory.hnsw_m == 16  # untouched settings keep their default


def test_data_dir_in_node_toml_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "node.toml").write_text('data_dir = "/somewhere/else"\n')
    assert load_config(tmp_path, environ={}).data_dir == tmp_path


def test_env_overrides_node_toml_and_overrides_win(tmp_path: Path) -> None:
    (tmp_path / "node.toml").write_text("[memory]\nhnsw_ef_search = 64\nhnsw_m = 8\n")
    environ = {
        "CRYSTALMESH_MEMORY_HNSW_EF_SEARCH": "128",
        "CRYSTALMESH_MEMORY_HNSW_M": "24",
        "CRYSTALMESH_NET_BOOTSTRAP": "/ip4/1.1.1.1/tcp/1, /ip4/2.2.2.2/tcp/2",
        "CRYSTALMESH_API_PORT": "8080",
        "CRYSTALMESH_HOME": "/not/a/section",
        "CRYSTALMESH_DEBUG": "1",
        "UNRELATED": "x",
    }
    config = load_config(tmp_path, overrides={"memory": {"hnsw_m": 32}}, environ=environ)
    assert config.memory.hnsw_ef_search == 128
    assert config.memory.hnsw_m == 32
    assert config.net.bootstrap == ["/ip4/1.1.1.1/tcp/1", "/ip4/2.2.2.2/tcp/2"]
    assert config.api.port == 8080


@pytest.mark.parametrize(
    "toml_text",
    [
        "colour = 1\n",
        "[memory]\nembeder = 'hashing'\n",
        "[nosuchsection]\nx = 1\n",
    ],
)
def test_unknown_key_in_node_toml_is_refused(tmp_path: Path, toml_text: str) -> None:
    (tmp_path / "node.toml").write_text(toml_text)
    with pytest.raises(ConfigError, match="unknown setting"):
        load_config(tmp_path, environ={})


def test_unknown_env_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown setting 'hnsw_efsearch'"):
        load_config(tmp_path, environ={"CRYSTALMESH_MEMORY_HNSW_EFSEARCH": "5"})


def test_unknown_override_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown setting"):
        load_config(tmp_path, overrides={"memory": {"nope": 1}}, environ={})


@pytest.mark.parametrize(
    "toml_text, where",
    [
        ("[memory]\nhnsw_ef_search = 'lots'\n", "memory.hnsw_ef_search"),
        ("[memory]\nhnsw_m = 1.5\n", "memory.hnsw_m"),
        ("[memory]\ndecay_rate = 'fast'\n", "memory.decay_rate"),
        ("memory = 3\n", "memory"),
        ("[api]\nport = [1, 2]\n", "api.port"),
    ],
)
def test_bad_type_is_refused_with_the_setting_named(
    tmp_path: Path, toml_text: str, where: str
) -> None:
    (tmp_path / "node.toml").write_text(toml_text)
    with pytest.raises(ConfigError, match=where.replace(".", r"\.")):
        load_config(tmp_path, environ={})


def test_bad_env_type_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"env\.api\.port"):
        load_config(tmp_path, environ={"CRYSTALMESH_API_PORT": "eighty"})


def test_malformed_toml_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "node.toml").write_text("[memory\n")
    with pytest.raises(ConfigError, match=r"node\.toml"):
        load_config(tmp_path, environ={})


def test_save_then_load_round_trips_every_setting(tmp_path: Path) -> None:
    config = NodeConfig(data_dir=tmp_path)
    config.name = 'odd "name" \\ with quotes'
    config.memory.embedder = "hashing"
    config.memory.decay_rate = 3.5e-11
    config.market.base_price_micro_usdc = 12_345
    config.trust.alpha = 0.25
    config.net.management_keys = ["ab" * 32, "cd" * 32]
    config.chain.settler_address = ""
    save_config(config)
    assert asdict(load_config(tmp_path, environ={})) == asdict(config)


toml_safe_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=toml_safe_text,
    bootstrap=st.lists(toml_safe_text, max_size=3),
    ef_search=st.integers(1, 10_000),
    decay_rate=st.floats(min_value=0, max_value=1, allow_nan=False),
    listen=toml_safe_text,
)
def test_dump_load_round_trip_property(
    tmp_path: Path,
    name: str,
    bootstrap: list[str],
    ef_search: int,
    decay_rate: float,
    listen: str,
) -> None:
    config = NodeConfig(data_dir=tmp_path)
    config.name = name
    config.net.bootstrap = bootstrap
    config.net.listen = listen
    config.memory.hnsw_ef_search = ef_search
    config.memory.decay_rate = decay_rate
    (tmp_path / "node.toml").write_text(dump_config(config))
    assert asdict(load_config(tmp_path, environ={})) == asdict(config)


def test_network_defaults_to_devnet_and_sets_the_chain_where_unset(tmp_path: Path) -> None:
    # A node.toml written before net.network existed keeps working as a devnet.
    (tmp_path / "node.toml").write_text('[net]\nlisten = "/ip4/127.0.0.1/tcp/4001"\n'
                                        '[chain]\ntoken_address = "0x' + "22" * 20 + '"\n')
    config = load_config(tmp_path, environ={})
    assert config.net.network == "devnet"
    assert config.chain.chain_id == BASE_SEPOLIA_CHAIN_ID
    assert config.chain.token_address == "0x" + "22" * 20  # set: kept

    mainnet = load_config(tmp_path / "m", environ={"CRYSTALMESH_NET_NETWORK": "mainnet"})
    assert (mainnet.chain.chain_id, mainnet.chain.token_address) == (
        BASE_MAINNET_CHAIN_ID, BASE_MAINNET_USDC)
    testnet = load_config(tmp_path / "t", overrides={"net": {"network": "testnet-lab"}}, environ={})
    assert (testnet.chain.chain_id, testnet.chain.token_address) == (
        BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC)
    # Saved and read back, the derived values stay what the network implies.
    save_config(mainnet)
    assert load_config(mainnet.data_dir, environ={}).chain.chain_id == BASE_MAINNET_CHAIN_ID


@pytest.mark.parametrize("network", ["", "Mainnet", "prod", "testnet-", "devnet_x", "testnet-" + "a" * 25,
                                     "mainnet-x", "../devnet", "devnet/1"])
def test_a_malformed_network_is_refused(tmp_path: Path, network: str) -> None:
    with pytest.raises(ConfigError, match=r"net\.network"):
        load_config(tmp_path, overrides={"net": {"network": network}}, environ={})


def test_a_chain_that_contradicts_the_network_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mainnet"):
        load_config(tmp_path, overrides={"net": {"network": "testnet"}, "chain": {"chain_id": 8453}},
                    environ={})
    with pytest.raises(ConfigError, match="mainnet"):
        load_config(tmp_path, overrides={"net": {"network": "mainnet"}, "chain": {"chain_id": 84532}},
                    environ={})

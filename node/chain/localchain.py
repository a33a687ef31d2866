"""The devnet chain: an anvil process with Base Sepolia's chain id, USDC at Base
Sepolia USDC's address, a BatchSettler, the batch-settlement channel contracts at the
x402 SDK's canonical addresses, and funded wallets.

``crystalmesh devnet up`` starts anvil detached (:func:`spawn_anvil`, it outlives the
CLI), waits for it (:func:`wait_for_rpc`), then :func:`deploy_devnet` and :func:`fund`.
Tests use :func:`start_local_chain`, which owns the process and stops it.

The token is not deployed by a constructor at its address: its runtime code is written
there with ``anvil_setCode`` and its one storage word (``owner``) with
``anvil_setStorageAt``, so x402 (which only trusts known USDC addresses) accepts it. The
channel contracts (:func:`node.chain.contracts.channel_contract_codes`) are placed the same
way, because the SDK signs and calls them at fixed addresses; code already at one of those
addresses (a fork of Base with the audited deployment) is never replaced.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from eth_abi import encode
from eth_account import Account
from eth_utils import function_signature_to_4byte_selector, to_checksum_address
from web3 import Web3

from node.chain.authorization import domain_separator
from node.chain.client import ChainClient, connect_web3
from node.chain.contracts import (
    REPO_ROOT,
    channel_contract_codes,
    settler_artifact,
    usdc_artifact,
    usdc_genesis_storage,
)
from node.chain.errors import LocalChainError
from node.config import BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC

log = logging.getLogger(__name__)

# anvil's first well-known development account (10 000 ETH on every fresh anvil).
ANVIL_DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
ANVIL_ENV = "CRYSTALMESH_ANVIL"
SELECTOR_MINT = function_signature_to_4byte_selector("mint(address,uint256)")


@dataclass(frozen=True)
class DevnetChain:
    rpc_url: str
    chain_id: int
    token_address: str
    settler_address: str
    deployer_address: str


def anvil_binary() -> Path:
    """``$CRYSTALMESH_ANVIL`` or ``<repo>/tools/node_modules/.bin/anvil``."""
    configured = os.environ.get(ANVIL_ENV)
    candidate = Path(configured) if configured else REPO_ROOT / "tools" / "node_modules" / ".bin" / "anvil"
    if not (candidate.exists() and os.access(candidate, os.X_OK)):
        raise LocalChainError(
            f"anvil not found at {candidate}: run scripts/setup (installs it under tools/), "
            f"or set {ANVIL_ENV} to an anvil binary"
        )
    return candidate


def free_port() -> int:
    """A free port for a devnet process to listen on later, below the ephemeral range.

    Ports handed out by the kernel for ``bind(0)`` come from the ephemeral range, the
    same range outgoing connections take their source ports from: between choosing
    such a port and a node binding it, another node's dial could take it (seen as a
    node exiting at start-up). So pick from below that range and check it is free.
    A port is handed out once per process: a devnet asks for all its ports before any
    process binds one, and the probe alone gave one node the same port for its libp2p
    listener and its API (seen in the suite: the node exited at start-up).
    """
    low, _high = _ephemeral_range()
    for _ in range(200):
        port = random.randint(max(1024, low - 12000), low - 1)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket() as probe:  # a crowded machine: fall back to the kernel's choice
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


_HANDED_OUT: set[int] = set()  # at most 12,000 ports: bounded by the range drawn from


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def rpc_url_for(port: int) -> str:
    return f"http://127.0.0.1:{port}"


# How often a devnet chain writes its state to disk: a kill -9 loses at most the
# blocks of the last interval (a clean stop writes it on exit).
STATE_INTERVAL_S = 1


def _anvil_command(port: int, chain_id: int, block_time_s: float | None,
                   state_path: Path | None = None) -> list[str]:
    command = [str(anvil_binary()), "--chain-id", str(chain_id), "--host", "127.0.0.1",
               "--port", str(port), "--silent"]
    if block_time_s:
        command += ["--block-time", str(block_time_s)]
    if state_path is not None:
        # --state loads the file if it exists and dumps to it on exit and every interval.
        command += ["--state", str(state_path), "--state-interval", str(STATE_INTERVAL_S)]
    return command


def spawn_anvil(port: int, log_path: Path, *, chain_id: int = BASE_SEPOLIA_CHAIN_ID,
                block_time_s: float | None = None, state_path: Path | None = None) -> int:
    """Start anvil detached from this process (own session, output to ``log_path``)
    and return its pid; it keeps running after the caller exits. Stop it with
    :func:`stop_process`. Call :func:`wait_for_rpc` before using it."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            _anvil_command(port, chain_id, block_time_s, state_path),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process.pid


def wait_for_rpc(url: str, timeout_s: float = 10.0, *, expected_chain_id: int | None = None) -> int:
    """Poll ``eth_chainId`` until the node answers; return the chain id."""
    w3 = connect_web3(url, timeout_s=1.0)
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            chain_id = int(w3.eth.chain_id)
        except Exception as exc:
            last_error = exc
            time.sleep(0.02)
            continue
        if expected_chain_id is not None and chain_id != expected_chain_id:
            raise LocalChainError(f"{url} serves chain {chain_id}, expected {expected_chain_id}")
        return chain_id
    raise LocalChainError(f"no chain RPC answered at {url} within {timeout_s}s ({last_error})")


def stop_process(pid: int, timeout_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout_s``; quiet if it is already gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
            if finished:
                return
        except ChildProcessError:  # not our child: poll for existence
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class LocalChain:
    """An anvil owned by this process (tests, benchmarks); stops on :meth:`stop`."""

    def __init__(self, port: int | None = None, log_path: Path | None = None,
                 chain_id: int = BASE_SEPOLIA_CHAIN_ID, block_time_s: float | None = None) -> None:
        self.port = port or free_port()
        self.chain_id = chain_id
        self.rpc_url = rpc_url_for(self.port)
        output = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                _anvil_command(self.port, chain_id, block_time_s),
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            )
        finally:
            if log_path:
                output.close()  # type: ignore[union-attr]
        try:
            wait_for_rpc(self.rpc_url, expected_chain_id=chain_id)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LocalChain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def start_local_chain(**kwargs: object) -> Iterator[LocalChain]:
    chain = LocalChain(**kwargs)  # type: ignore[arg-type]
    try:
        yield chain
    finally:
        chain.stop()


def _word(value: int) -> str:
    return "0x" + value.to_bytes(32, "big").hex()


def deploy_devnet(rpc_url: str, deployer_key: str = ANVIL_DEV_KEY,
                  token_address: str = BASE_SEPOLIA_USDC) -> DevnetChain:
    """Put USDC at ``token_address`` (owner = deployer) and deploy a BatchSettler."""
    w3 = connect_web3(rpc_url)
    deployer = Account.from_key(deployer_key)
    token_address = to_checksum_address(token_address)
    try:
        w3.provider.make_request("anvil_setCode",  # type: ignore[arg-type]
                                 [token_address, "0x" + usdc_artifact().deployed_bytecode.hex()])
        for slot, value in usdc_genesis_storage(deployer.address).items():
            w3.provider.make_request("anvil_setStorageAt",  # type: ignore[arg-type]
                                     [token_address, _word(slot), _word(value)])
    except Exception as exc:
        raise LocalChainError(f"cannot place USDC on {rpc_url} (not an anvil?): {exc}") from exc
    place_channel_contracts(w3)
    client = ChainClient(w3, token_address)
    settler_address = deploy_contract(client, deployer, settler_artifact().bytecode)
    chain = DevnetChain(rpc_url=rpc_url, chain_id=client.chain_id, token_address=token_address,
                        settler_address=settler_address, deployer_address=deployer.address)
    check_token(w3, chain.token_address, chain.chain_id)
    log.info("devnet deployed token=%s settler=%s", chain.token_address, chain.settler_address)
    return chain


def place_channel_contracts(w3: Web3) -> dict[str, bool]:
    """Put the batch-settlement contracts at the SDK's canonical addresses on an anvil.

    Returns, per address, whether code was written (False: something is already there,
    e.g. the audited deployment on a fork of Base, and it is kept).
    """
    placed: dict[str, bool] = {}
    for address, code in channel_contract_codes().items():
        if len(w3.eth.get_code(to_checksum_address(address))) > 0:
            placed[address] = False
            continue
        try:
            w3.provider.make_request("anvil_setCode", [address, "0x" + code.hex()])  # type: ignore[arg-type]
        except Exception as exc:
            raise LocalChainError(f"cannot place the channel contracts (not an anvil?): {exc}") from exc
        placed[address] = True
    return placed


def deploy_contract(client: ChainClient, deployer: object, creation_code: bytes) -> str:
    """Send a contract-creation transaction; return the new address."""
    from eth_account.signers.local import LocalAccount

    assert isinstance(deployer, LocalAccount)
    signed = deployer.sign_transaction({
        "data": creation_code, "gas": 3_000_000, **client.fee_fields(), "value": 0,
        "nonce": client.w3.eth.get_transaction_count(deployer.address, "pending"),
        "chainId": client.chain_id,
    })
    tx_hash = client.w3.eth.send_raw_transaction(signed.raw_transaction)
    receipt = client.w3.eth.wait_for_transaction_receipt(tx_hash, poll_latency=0.01)
    if receipt["status"] != 1 or not receipt["contractAddress"]:
        raise LocalChainError(f"contract deployment failed: {tx_hash.to_0x_hex()}")
    return to_checksum_address(receipt["contractAddress"])


def check_token(w3: Web3, token_address: str, chain_id: int) -> None:
    """The token at ``token_address`` computes the EIP-712 domain we sign against."""
    on_chain = bytes(w3.eth.call({"to": token_address, "data": Web3.keccak(text="DOMAIN_SEPARATOR()")[:4]}))
    if on_chain != domain_separator(chain_id, token_address):
        raise LocalChainError(f"token at {token_address} has an unexpected EIP-712 domain")


def fund(rpc_url: str | Web3, wallet_addresses: Iterable[str], *, usdc_micro: int, eth_wei: int,
         deployer_key: str = ANVIL_DEV_KEY, token_address: str = BASE_SEPOLIA_USDC) -> None:
    """Mint ``usdc_micro`` to each wallet and send it ``eth_wei`` (for settlement gas),
    from the deployer (the token's owner). All transactions are sent, then the last
    one is awaited."""
    w3 = rpc_url if isinstance(rpc_url, Web3) else connect_web3(rpc_url)
    client = ChainClient(w3, token_address)
    deployer = Account.from_key(deployer_key)
    last: str | None = None
    for address in wallet_addresses:
        address = to_checksum_address(address)
        if usdc_micro:
            data = SELECTOR_MINT + encode(["address", "uint256"], [address, usdc_micro])
            last = client.send(deployer, client.token_address, data, 100_000)
        if eth_wei:
            last = client.send(deployer, address, b"", 21_000, value_wei=eth_wei)
    if last is not None:
        receipt = client.wait_receipt(last, 60)
        if receipt["status"] != 1:
            raise LocalChainError(f"funding transaction {last} failed")

"""The chain layer against a real anvil: devnet layout, x402 interop both ways, and a
settling process killed with SIGKILL between submit and confirm."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from node.chain.authorization import sign_authorization
from node.chain.client import ChainClient
from node.chain.errors import LocalChainError
from node.chain.ledger import CONFIRMED, SettlementLedger
from node.chain.localchain import (
    ANVIL_DEV_KEY,
    DevnetChain,
    LocalChain,
    anvil_binary,
    deploy_devnet,
    free_port,
    fund,
    rpc_url_for,
    spawn_anvil,
    stop_process,
    wait_for_rpc,
)
from node.chain.settlement import SettlementEngine
from node.chain.wallet import balances, load_or_create_wallet
from node.chain.x402 import payment_requirements
from node.config import BASE_SEPOLIA_USDC
from tests.support.tools import missing_tool

pytestmark = pytest.mark.e2e
PRICE = 10_000
REPO = Path(__file__).resolve().parents[2]

try:
    anvil_binary()
except LocalChainError as missing:
    missing_tool(str(missing), module_level=True)


@pytest.fixture(scope="module")
def devnet() -> Iterator[DevnetChain]:
    with LocalChain() as chain:
        yield deploy_devnet(chain.rpc_url)


@pytest.fixture
def buyer(devnet: DevnetChain) -> LocalAccount:
    account = Account.create()
    fund(devnet.rpc_url, [account.address], usdc_micro=1_000_000, eth_wei=0)
    return account


@pytest.fixture
def seller(devnet: DevnetChain, tmp_path: Path) -> LocalAccount:
    account = load_or_create_wallet(tmp_path / "wallet.key")
    fund(devnet.rpc_url, [account.address], usdc_micro=0, eth_wei=10**18)
    return account


def engine_for(devnet: DevnetChain, seller: LocalAccount, data_dir: Path) -> SettlementEngine:
    return SettlementEngine.open(rpc_url=devnet.rpc_url, chain_id=devnet.chain_id,
                                 token_address=devnet.token_address,
                                 settler_address=devnet.settler_address, sender=seller, data_dir=data_dir)


def test_devnet_layout_and_wallet(devnet: DevnetChain, seller: LocalAccount, tmp_path: Path) -> None:
    assert devnet.chain_id == 84532 and devnet.token_address == BASE_SEPOLIA_USDC
    assert oct((tmp_path / "wallet.key").stat().st_mode & 0o777) == "0o600"
    assert load_or_create_wallet(tmp_path / "wallet.key").address == seller.address
    assert balances(devnet.rpc_url, devnet.token_address, seller.address) == {
        "usdc_micro": 0, "eth_wei": 10**18}


def test_spawned_anvil_outlives_its_parent_handle(tmp_path: Path) -> None:
    port = free_port()
    pid = spawn_anvil(port, tmp_path / "anvil.log")
    try:
        assert wait_for_rpc(rpc_url_for(port), expected_chain_id=84532) == 84532
        chain = deploy_devnet(rpc_url_for(port))
        fund(chain.rpc_url, [chain.deployer_address], usdc_micro=5, eth_wei=0)
        assert balances(chain.rpc_url, chain.token_address, chain.deployer_address)["usdc_micro"] == 5
    finally:
        stop_process(pid)
    with pytest.raises(LocalChainError):
        wait_for_rpc(rpc_url_for(port), timeout_s=0.3)


def _x402_facilitator(devnet: DevnetChain, key: str):  # type: ignore[no-untyped-def]
    from x402 import x402FacilitatorSync
    from x402.mechanisms.evm import FacilitatorWeb3Signer
    from x402.mechanisms.evm.exact import register_exact_evm_facilitator

    facilitator = x402FacilitatorSync()
    signer = FacilitatorWeb3Signer(private_key=key, rpc_url=devnet.rpc_url)
    register_exact_evm_facilitator(facilitator, signer, networks="eip155:84532")
    return facilitator


def test_our_authorization_settles_through_x402_facilitator(
        devnet: DevnetChain, buyer: LocalAccount, seller: LocalAccount) -> None:
    from x402.schemas import PaymentPayload, PaymentRequirements

    requirements = payment_requirements(chain_id=devnet.chain_id, token_address=devnet.token_address,
                                        pay_to=seller.address, price_micro=PRICE)
    authorization = sign_authorization(buyer, chain_id=devnet.chain_id, token_address=devnet.token_address,
                                       to=seller.address, value_micro=PRICE)
    payload = PaymentPayload.model_validate(
        {"x402Version": 2, "payload": authorization.to_x402_payload(), "accepted": requirements})
    terms = PaymentRequirements.model_validate(requirements)
    facilitator = _x402_facilitator(devnet, ANVIL_DEV_KEY)
    verdict = facilitator.verify(payload, terms)
    assert verdict.is_valid, verdict
    settled = facilitator.settle(payload, terms)
    assert settled.success, settled
    assert balances(devnet.rpc_url, devnet.token_address, seller.address)["usdc_micro"] == PRICE
    # Replaying the same payload to the facilitator fails on chain.
    assert not facilitator.settle(payload, terms).success


def test_x402_client_payment_settles_through_our_engine(
        devnet: DevnetChain, buyer: LocalAccount, seller: LocalAccount, tmp_path: Path) -> None:
    from x402.mechanisms.evm.exact import ExactEvmClientScheme
    from x402.schemas import PaymentRequirements

    from node.chain.x402 import authorization_from_payment

    requirements = PaymentRequirements.model_validate(
        payment_requirements(chain_id=devnet.chain_id, token_address=devnet.token_address,
                             pay_to=seller.address, price_micro=PRICE))
    inner = ExactEvmClientScheme(buyer).create_payment_payload(requirements)
    engine = engine_for(devnet, seller, tmp_path)
    row = engine.accept_payment(authorization_from_payment(inner), price_micro=PRICE)
    assert row.state == CONFIRMED
    assert balances(devnet.rpc_url, devnet.token_address, seller.address)["usdc_micro"] == PRICE


CRASHING_SETTLER = textwrap.dedent("""
    import os, signal, sys
    from eth_account import Account
    from node.chain.authorization import Authorization
    from node.chain.settlement import SettlementEngine
    rpc_url, token, settler, key, data_dir, wire = sys.argv[1:7]
    engine = SettlementEngine.open(rpc_url=rpc_url, chain_id=84532, token_address=token,
                                   settler_address=settler, sender=Account.from_key(key),
                                   data_dir=data_dir)
    def killed(*args, **kwargs):  # broadcast done, receipt never read
        os.kill(os.getpid(), signal.SIGKILL)
    engine.client.wait_receipt = killed
    import json
    fields = json.loads(wire)
    authorization = Authorization(from_address=fields["from"], to=fields["to"], value_micro=fields["value"],
        valid_after_s=fields["valid_after"], valid_before_s=fields["valid_before"],
        nonce=bytes.fromhex(fields["nonce"]), signature=bytes.fromhex(fields["signature"]))
    engine.accept_payment(authorization, price_micro=fields["value"])
""")


def test_sigkill_between_submit_and_confirm_reconciles_once(
        devnet: DevnetChain, buyer: LocalAccount, seller: LocalAccount, tmp_path: Path) -> None:
    import json

    authorization = sign_authorization(buyer, chain_id=devnet.chain_id, token_address=devnet.token_address,
                                       to=seller.address, value_micro=PRICE)
    wire = {**authorization.to_wire(), "nonce": authorization.nonce.hex(),
            "signature": authorization.signature.hex()}
    process = subprocess.run(
        [sys.executable, "-c", CRASHING_SETTLER, devnet.rpc_url, devnet.token_address,
         devnet.settler_address, seller.key.to_0x_hex(), str(tmp_path), json.dumps(wire)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, timeout=60)
    assert process.returncode == -9, process.stderr.decode()
    crashed = SettlementLedger(tmp_path / "settlements.db").get(authorization.key)
    assert crashed is not None and crashed.state == "submitted" and crashed.tx_hash

    client = ChainClient.connect(devnet.rpc_url, devnet.token_address)
    sent_before = client.w3.eth.get_transaction_count(seller.address)
    restarted = engine_for(devnet, seller, tmp_path)
    [row] = restarted.reconcile()
    assert row.state == CONFIRMED and row.tx_hash == crashed.tx_hash
    assert client.w3.eth.get_transaction_count(seller.address) == sent_before
    assert balances(devnet.rpc_url, devnet.token_address, seller.address)["usdc_micro"] == PRICE

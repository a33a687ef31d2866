"""Our batch-settlement channel contract on a real anvil, driven by the x402 SDK's own code:
its client (deposit, vouchers), resource server (verify, settle, channel manager) and
facilitator (EIP-3009 deposit, claim, settle, refund), plus the refusals, on chain and in
the SDK's checks. One anvil for the module; time moves by ``evm_increaseTime``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from eth_account.signers.local import LocalAccount
from eth_utils import keccak
from web3.exceptions import ContractCustomError, ContractLogicError
from x402.mechanisms.evm.batch_settlement import errors as sdk_errors
from x402.mechanisms.evm.batch_settlement.authorizer_signer import (
    LocalAuthorizerSigner,
    sign_refund,
)
from x402.mechanisms.evm.batch_settlement.constants import (
    BATCH_SETTLEMENT_ADDRESS,
    ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
)
from x402.mechanisms.evm.batch_settlement.facilitator.claim import build_voucher_claim_args
from x402.mechanisms.evm.batch_settlement.facilitator.deposit_eip3009 import (
    build_eip3009_deposit_collector_data,
)
from x402.mechanisms.evm.batch_settlement.facilitator.utils import to_contract_channel_config
from x402.schemas import PaymentPayload, PaymentRequirements, ResourceInfo, SettleResponse

from node.chain.channels import (
    ChannelError,
    Channels,
    SignedVoucher,
    channel_config,
    channel_requirements,
    new_salt,
    sign_channel_voucher,
    sign_deposit,
)
from node.chain.contracts import channel_contract_codes, load_artifact
from node.chain.localchain import fund, place_channel_contracts
from tests.support.channels import (
    WITHDRAW_DELAY_S,
    ChannelDevnet,
    channel_devnet,
    require_anvil,
    sdk_client,
    sdk_purchase,
    sdk_stack,
)

pytestmark = pytest.mark.e2e
require_anvil()

PRICE = 10_000
START_USDC = 5_000_000
DEPOSIT = 100_000


@pytest.fixture(scope="module")
def net() -> Iterator[ChannelDevnet]:
    with channel_devnet() as devnet:
        yield devnet


@pytest.fixture
def seller(net: ChannelDevnet) -> LocalAccount:
    return net.account(eth_wei=10**18)


@pytest.fixture
def buyer(net: ChannelDevnet) -> LocalAccount:
    return net.account(usdc_micro=START_USDC)


def contract(net: ChannelDevnet) -> Any:
    return net.client.w3.eth.contract(address=BATCH_SETTLEMENT_ADDRESS, abi=load_artifact("ChannelSettlement").abi)


def error_selector(name: str) -> str:
    for entry in load_artifact("ChannelSettlement").abi + load_artifact("ERC3009DepositCollector").abi:
        if entry["type"] == "error" and entry["name"] == name:
            signature = f"{name}({','.join(item['type'] for item in entry['inputs'])})"
            return "0x" + keccak(text=signature)[:4].hex()
    raise KeyError(name)


def assert_reverts(call: Any, sender: str, error: str) -> None:
    """The call, simulated from ``sender``, reverts with our custom error ``error``."""
    with pytest.raises(ContractCustomError) as raised:
        call.call({"from": sender})
    assert str(raised.value.data).startswith(error_selector(error)), (error, raised.value.data)


def open_channel(net: ChannelDevnet, buyer: LocalAccount, seller: LocalAccount,
                 deposit: int = DEPOSIT, first_voucher: int = PRICE) -> tuple[Channels, SignedVoucher]:
    """Buyer signs a deposit (EIP-3009 to the collector) with its first voucher; the seller
    relays it through the SDK's facilitator."""
    channels = Channels(net.client, seller)
    config = channel_config(payer=buyer.address, receiver=seller.address, receiver_authorizer=seller.address,
                            token_address=net.devnet.token_address, salt=new_salt())
    requirements = channel_requirements(chain_id=net.devnet.chain_id, token_address=net.devnet.token_address,
                                        pay_to=seller.address, price_micro=PRICE,
                                        receiver_authorizer=seller.address)
    channels.deposit(sign_deposit(buyer, requirements, config, deposit, first_voucher), requirements)
    return channels, sign_channel_voucher(buyer, config, net.devnet.chain_id, first_voucher)


# --- the SDK's whole stack against our contract ----------------------------------------------------

def test_sdk_stack_deposit_vouchers_one_claim_settle_and_refund(net: ChannelDevnet, seller: LocalAccount) -> None:
    relayer = net.account(eth_wei=10**18)
    stack = sdk_stack(net, seller, relayer, PRICE)
    buyers = [net.account(usdc_micro=START_USDC) for _ in range(3)]
    for buyer in buyers:
        client, _scheme = sdk_client(buyer)
        kinds = []
        for _ in range(3):
            settled = sdk_purchase(stack, client)
            assert settled.success, settled
            kinds.append("deposit" if settled.transaction else "voucher")
        # The first purchase deposits (the SDK's default: 10 x price), the rest are vouchers
        # verified without a transaction.
        assert kinds == ["deposit", "voucher", "voucher"]
        assert net.usdc(buyer.address) == START_USDC - 10 * PRICE
    held_before = net.usdc(BATCH_SETTLEMENT_ADDRESS)

    manager = stack.manager()
    [claim] = manager.claim()
    assert claim.vouchers == 3  # three channels, one transaction
    receipt = net.client.wait_receipt(claim.transaction)
    assert receipt["status"] == 1 and receipt["from"] == relayer.address
    assert net.usdc(BATCH_SETTLEMENT_ADDRESS) == held_before  # a claim only moves accounting
    manager.settle()
    assert net.usdc(seller.address) == 9 * PRICE

    refunds = manager.refund()
    assert len(refunds) == 3
    for buyer in buyers:
        assert net.usdc(buyer.address) == START_USDC - 3 * PRICE
    # Out of the contract: 9 purchases to the seller, 3 x 7 unused to the buyers.
    assert net.usdc(BATCH_SETTLEMENT_ADDRESS) == held_before - 9 * PRICE - 21 * PRICE
    channels = Channels(net.client, seller)
    assert channels.receiver_totals(seller.address) == (9 * PRICE, 9 * PRICE)


def test_sdk_server_refuses_a_replayed_or_lower_voucher(net: ChannelDevnet, seller: LocalAccount) -> None:
    from x402.schemas.errors import PaymentAbortedError

    stack = sdk_stack(net, seller, net.account(eth_wei=10**18), PRICE)
    client, _scheme = sdk_client(net.account(usdc_micro=START_USDC))
    assert sdk_purchase(stack, client).success
    payload = client.create_payment_payload(stack.payment_required)
    assert stack.server.verify_payment(payload, stack.requirements).is_valid
    assert stack.server.settle_payment(payload, stack.requirements).success
    # The same voucher again (a replay: not above what was charged) is refused.
    with pytest.raises(PaymentAbortedError, match=sdk_errors.ERR_CUMULATIVE_AMOUNT_MISMATCH):
        stack.server.verify_payment(payload, stack.requirements)


# --- the SDK facilitator's checks, on our contract's state -----------------------------------------

def voucher_payment(voucher: SignedVoucher, requirements: Any, channel: Any = None) -> PaymentPayload:
    return PaymentPayload(x402_version=2, accepted=requirements, payload={
        "type": "voucher", "channelConfig": (channel or voucher.channel).to_dict(),
        "voucher": {"channelId": voucher.channel_id, "maxClaimableAmount": str(voucher.max_claimable_micro),
                    "signature": voucher.signature}})


def test_facilitator_refuses_over_deposit_forged_wrong_channel_and_below_claimed(
        net: ChannelDevnet, buyer: LocalAccount, seller: LocalAccount) -> None:
    channels, first = open_channel(net, buyer, seller)
    chain_id = net.devnet.chain_id
    requirements = channel_requirements(chain_id=chain_id, token_address=net.devnet.token_address,
                                        pay_to=seller.address, price_micro=PRICE, receiver_authorizer=seller.address)

    def verdict(payment: PaymentPayload) -> str | None:
        response = channels.facilitator.verify(payment, requirements)
        return None if response.is_valid else response.invalid_reason

    assert verdict(voucher_payment(sign_channel_voucher(buyer, first.channel, chain_id, 2 * PRICE),
                                   requirements)) is None
    over = sign_channel_voucher(buyer, first.channel, chain_id, DEPOSIT + 1)
    assert verdict(voucher_payment(over, requirements)) == sdk_errors.ERR_CUMULATIVE_EXCEEDS_BALANCE
    forger = net.account()
    forged = sign_channel_voucher(forger, first.channel, chain_id, 2 * PRICE)
    assert verdict(voucher_payment(forged, requirements)) == sdk_errors.ERR_INVALID_VOUCHER_SIGNATURE
    _other_channels, other = open_channel(net, net.account(usdc_micro=START_USDC), seller)
    assert verdict(voucher_payment(first, requirements, channel=other.channel)) == \
        sdk_errors.ERR_CHANNEL_ID_MISMATCH
    channels.claim([sign_channel_voucher(buyer, first.channel, chain_id, 3 * PRICE)])
    stale = sign_channel_voucher(buyer, first.channel, chain_id, 3 * PRICE)
    assert verdict(voucher_payment(stale, requirements)) == sdk_errors.ERR_CUMULATIVE_AMOUNT_BELOW_CLAIMED


# --- our contract's own refusals (what a hostile relayer could submit directly) -----------------------

def test_contract_refuses_bad_claims(net: ChannelDevnet, buyer: LocalAccount, seller: LocalAccount) -> None:
    channels, first = open_channel(net, buyer, seller)
    chain_id = net.devnet.chain_id
    settlement = contract(net)
    good = sign_channel_voucher(buyer, first.channel, chain_id, 2 * PRICE)

    def claim_rows(*rows: Any) -> list[Any]:
        return build_voucher_claim_args(list(rows))

    forged = SignedVoucher(first.channel, first.channel_id, 2 * PRICE,
                           sign_channel_voucher(net.account(), first.channel, chain_id, 2 * PRICE).signature)
    assert_reverts(settlement.functions.claim(claim_rows(forged.claim())), seller.address, "InvalidVoucherSignature")
    _other_channels, other = open_channel(net, net.account(usdc_micro=START_USDC), seller)
    moved = SignedVoucher(other.channel, other.channel_id, 2 * PRICE, good.signature)
    assert_reverts(settlement.functions.claim(claim_rows(moved.claim())), seller.address, "InvalidVoucherSignature")
    assert_reverts(settlement.functions.claim(claim_rows(good.claim(2 * PRICE + 1))), seller.address,
                   "ClaimAboveVoucher")
    over = sign_channel_voucher(buyer, first.channel, chain_id, DEPOSIT + 1)
    assert_reverts(settlement.functions.claim(claim_rows(over.claim())), seller.address, "ClaimAboveBalance")
    stranger = net.account()
    assert_reverts(settlement.functions.claim(claim_rows(good.claim())), stranger.address, "NotReceiverSide")
    forged_batch = settlement.functions.claimWithSignature(
        claim_rows(good.claim()), bytes.fromhex(first.signature[2:]))
    assert_reverts(forged_batch, stranger.address, "InvalidAuthorizerSignature")
    # Through the SDK's facilitator the same refusal is a clear error and nothing moves.
    with pytest.raises(ChannelError, match=sdk_errors.ERR_CLAIM_SIMULATION_FAILED):
        channels.claim([forged])
    assert channels.state(first.channel_id).total_claimed_micro == 0
    # A voucher below what is claimed is superseded: claiming it changes nothing.
    channels.claim([good])
    channels.claim([sign_channel_voucher(buyer, first.channel, chain_id, PRICE)])
    assert channels.state(first.channel_id).total_claimed_micro == 2 * PRICE
    assert channels.receiver_totals(seller.address)[0] >= 2 * PRICE


def test_contract_refuses_bad_deposits(net: ChannelDevnet, buyer: LocalAccount, seller: LocalAccount) -> None:
    chain_id = net.devnet.chain_id
    settlement = contract(net)
    requirements = channel_requirements(chain_id=chain_id, token_address=net.devnet.token_address,
                                        pay_to=seller.address, price_micro=PRICE, receiver_authorizer=seller.address)
    config = channel_config(payer=buyer.address, receiver=seller.address, receiver_authorizer=seller.address,
                            token_address=net.devnet.token_address, salt=new_salt())
    payload = sign_deposit(buyer, requirements, config, DEPOSIT, PRICE)
    data = build_eip3009_deposit_collector_data(payload)
    relayer = net.account(eth_wei=10**18)
    # The signed authorization pays into its own channel only: another config reverts in the token.
    other = channel_config(payer=buyer.address, receiver=relayer.address, receiver_authorizer=relayer.address,
                           token_address=net.devnet.token_address, salt=config.salt)
    with pytest.raises(ContractLogicError, match="invalid signature"):
        settlement.functions.deposit(to_contract_channel_config(other), DEPOSIT, ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
                                     data).call({"from": relayer.address})
    # Nor can anyone have the collector pull it to themselves.
    collector = net.client.w3.eth.contract(address=ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
                                           abi=load_artifact("ERC3009DepositCollector").abi)
    assert_reverts(collector.functions.collect(buyer.address, net.devnet.token_address, DEPOSIT,
                                               bytes.fromhex(payload.voucher.channel_id[2:]), data),
                   relayer.address, "OnlySettlement")
    for delay in (WITHDRAW_DELAY_S - 1, 30 * 86400 + 1):
        short = channel_config(payer=buyer.address, receiver=seller.address, receiver_authorizer=seller.address,
                               token_address=net.devnet.token_address, withdraw_delay_s=900, salt=config.salt)
        short.withdraw_delay = delay
        assert_reverts(settlement.functions.deposit(to_contract_channel_config(short), DEPOSIT,
                                                    ERC3009_DEPOSIT_COLLECTOR_ADDRESS, data),
                       relayer.address, "InvalidChannelConfig")
    channels = Channels(net.client, relayer)
    channels.deposit(payload, requirements)
    assert channels.state(payload.voucher.channel_id).balance_micro == DEPOSIT
    with pytest.raises(ChannelError):  # the same authorization twice
        channels.deposit(payload, requirements)
    assert channels.state(payload.voucher.channel_id).balance_micro == DEPOSIT
    assert net.usdc(buyer.address) == START_USDC - DEPOSIT


# --- refunds and the timed withdrawal ------------------------------------------------------------------

def test_cooperative_refund_and_its_refusals(net: ChannelDevnet, buyer: LocalAccount, seller: LocalAccount) -> None:
    channels, first = open_channel(net, buyer, seller)
    chain_id = net.devnet.chain_id
    settlement = contract(net)
    latest = sign_channel_voucher(buyer, first.channel, chain_id, 4 * PRICE)
    config = to_contract_channel_config(first.channel)
    stranger = net.account()
    assert_reverts(settlement.functions.refund(config, PRICE), stranger.address, "NotReceiverSide")
    tx_hash, refunded = channels.refund(latest, 2 * PRICE)  # claims the voucher, refunds 2 x price
    assert refunded == 2 * PRICE and tx_hash
    state = channels.state(first.channel_id)
    assert (state.balance_micro, state.total_claimed_micro, state.refund_nonce) == (DEPOSIT - 2 * PRICE, 4 * PRICE, 1)
    assert net.usdc(buyer.address) == START_USDC - DEPOSIT + 2 * PRICE
    # A refund signature for a used nonce cannot be replayed.
    old = sign_refund(channels.authorizer, first.channel_id, PRICE, 0, channels.network)
    assert_reverts(settlement.functions.refundWithSignature(config, PRICE, 0, bytes.fromhex(old[2:])),
                   stranger.address, "StaleRefundNonce")
    forged = sign_refund(LocalAuthorizerSigner(net.account()), first.channel_id, PRICE, 1, channels.network)
    assert_reverts(settlement.functions.refundWithSignature(config, PRICE, 1, bytes.fromhex(forged[2:])),
                   stranger.address, "InvalidAuthorizerSignature")
    _tx, rest = channels.refund(latest)  # the rest, to the last micro
    assert rest == DEPOSIT - 2 * PRICE - 4 * PRICE
    assert net.usdc(buyer.address) == START_USDC - 4 * PRICE
    with pytest.raises(ChannelError, match=sdk_errors.ERR_REFUND_NO_BALANCE):
        channels.refund(latest)
    channels.settle()
    assert net.usdc(seller.address) == 4 * PRICE


def test_devnet_places_the_contracts_at_the_canonical_addresses_once(net: ChannelDevnet) -> None:
    for address, code in channel_contract_codes().items():
        assert bytes(net.client.w3.eth.get_code(address)) == code
    # Code already at an address (e.g. the audited deployment on a fork of Base) is kept.
    assert place_channel_contracts(net.client.w3) == {address: False for address in channel_contract_codes()}


# --- the seller's HTTP side (node.chain.x402_channels) on the SDK's resource server ------------------

def test_channel_payments_verify_settle_replay_and_a_withdrawing_channel(
        net: ChannelDevnet, buyer: LocalAccount, seller: LocalAccount, tmp_path: Any) -> None:
    from x402.schemas.hooks import PaymentResponseContext

    from node.chain.x402_channels import CHANNEL_WITHDRAWING, ChannelPaymentRefused, ChannelPayments

    # A zero TTL: every voucher is checked against the chain (so a withdrawal is seen at once).
    payments = ChannelPayments(net.client, seller, net.devnet.chain_id, tmp_path / "x402-channels",
                               onchain_state_ttl_ms=0)
    offered = payments.requirements(pay_to=seller.address, price_micro=PRICE, max_timeout_s=300)
    resource = {"url": "http://seller.test/skill", "description": "a skill", "mimeType": "application/json"}
    required = payments.server.create_payment_required_response(
        [PaymentRequirements.model_validate(offered)],
        ResourceInfo.model_validate(resource))
    client, _scheme = sdk_client(buyer)

    def pay() -> Any:
        payload = client.create_payment_payload(required)
        verified = payments.verify(payload.model_dump(by_alias=True, exclude_none=True), offered, resource)
        settled = payments.settle(verified)
        client.handle_payment_response(PaymentResponseContext(
            payment_payload=payload, requirements=verified.requirements,
            settle_response=SettleResponse.model_validate(settled.response), payment_required=required))
        return verified, settled

    first, deposited = pay()
    assert deposited.transaction and deposited.charged_total_micro == PRICE
    second, voucher = pay()
    assert voucher.transaction == "" and voucher.charged_total_micro == 2 * PRICE
    assert second.max_claimable_micro == 2 * PRICE and second.channel_id == first.channel_id
    # The latest voucher again: the same receipt, not a second charge; an older one: none.
    assert payments.replay_receipt(second.channel_id, 2 * PRICE, PRICE, buyer.address)["extra"][
        "channelState"]["chargedCumulativeAmount"] == str(2 * PRICE)
    assert payments.replay_receipt(second.channel_id, PRICE, PRICE, buyer.address) is None
    # The payer starts withdrawing: the next voucher is refused with a clear reason.
    fund(net.client.w3, [buyer.address], usdc_micro=0, eth_wei=10**17)
    Channels(net.client, buyer).initiate_withdraw(_config_of(first.payload.payload), PRICE)
    payload = client.create_payment_payload(required)
    with pytest.raises(ChannelPaymentRefused) as refused:
        payments.verify(payload.model_dump(by_alias=True, exclude_none=True), offered, resource)
    assert refused.value.reason == CHANNEL_WITHDRAWING
    assert refused.value.payment_required["error"] == CHANNEL_WITHDRAWING
    held = net.usdc(buyer.address)
    # The SDK's manager claims the two vouchers and pays the seller.
    payments.claim_and_settle()
    assert net.usdc(seller.address) == 2 * PRICE
    assert net.usdc(buyer.address) == held


def _config_of(raw: dict[str, Any]) -> Any:
    from x402.mechanisms.evm.batch_settlement.types import ChannelConfig

    return ChannelConfig.from_dict(raw["channelConfig"])


# Last: it moves the chain's clock 15 minutes ahead of the wall clock, after which an
# EIP-3009 deposit signed for the next 5 minutes (wall clock) looks expired on chain.
def test_timed_withdrawal_after_the_delay_and_claims_around_it(
        net: ChannelDevnet, buyer: LocalAccount, seller: LocalAccount) -> None:
    channels, first = open_channel(net, buyer, seller)
    chain_id = net.devnet.chain_id
    settlement = contract(net)
    config = to_contract_channel_config(first.channel)
    payer_side = Channels(net.client, buyer)
    fund(net.client.w3, [buyer.address], usdc_micro=0, eth_wei=10**17)  # the payer sends these itself
    assert_reverts(settlement.functions.initiateWithdraw(config, PRICE), seller.address, "NotPayerSide")
    assert_reverts(settlement.functions.initiateWithdraw(config, DEPOSIT + 1), buyer.address,
                   "WithdrawAboveAvailable")
    assert_reverts(settlement.functions.finalizeWithdraw(config), buyer.address, "NoPendingWithdrawal")
    payer_side.initiate_withdraw(first.channel, DEPOSIT)
    state = payer_side.state(first.channel_id)
    assert state.withdrawing and state.withdraw_amount_micro == DEPOSIT
    with pytest.raises(ChannelError, match="finalizeWithdraw_reverted"):
        payer_side.finalize_withdraw(first.channel)
    # The seller claims during the grace period: what it claims is not withdrawn.
    channels.claim([sign_channel_voucher(buyer, first.channel, chain_id, 3 * PRICE)])
    net.advance_time(WITHDRAW_DELAY_S)
    payer_side.finalize_withdraw(first.channel)
    state = payer_side.state(first.channel_id)
    assert (state.balance_micro, state.total_claimed_micro, state.withdrawing) == (3 * PRICE, 3 * PRICE, False)
    assert net.usdc(buyer.address) == START_USDC - 3 * PRICE
    # Past the withdrawal, a later voucher can no longer be claimed: the money is gone.
    late = sign_channel_voucher(buyer, first.channel, chain_id, 5 * PRICE)
    assert_reverts(settlement.functions.claim(build_voucher_claim_args([late.claim()])), seller.address,
                   "ClaimAboveBalance")
    channels.settle()
    assert net.usdc(seller.address) == 3 * PRICE

"""A real anvil with the devnet layout for payment-channel tests, and the x402 SDK's own
batch-settlement stack wired to it (its client, resource server, facilitator).

Use one per module (``scope="module"``): ``ChannelDevnet.start()`` takes ~0.1 s after
anvil answers. Time moves only by :meth:`ChannelDevnet.advance_time` (anvil's
``evm_increaseTime``), never by sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount

from node.chain.client import ChainClient
from node.chain.errors import LocalChainError
from node.chain.localchain import DevnetChain, LocalChain, anvil_binary, deploy_devnet, fund
from tests.support.tools import missing_tool

NETWORK = "eip155:84532"
WITHDRAW_DELAY_S = 900


def require_anvil() -> None:
    try:
        anvil_binary()
    except LocalChainError as missing:
        missing_tool(str(missing), module_level=True)


@dataclass
class ChannelDevnet:
    chain: LocalChain
    devnet: DevnetChain
    client: ChainClient

    @property
    def rpc_url(self) -> str:
        return self.devnet.rpc_url

    def account(self, usdc_micro: int = 0, eth_wei: int = 0) -> LocalAccount:
        """A fresh wallet holding exactly ``usdc_micro`` and ``eth_wei``."""
        account = Account.create()
        if usdc_micro or eth_wei:
            fund(self.client.w3, [account.address], usdc_micro=usdc_micro, eth_wei=eth_wei)
        return account

    def usdc(self, address: str) -> int:
        return self.client.usdc_balance(address)

    def advance_time(self, seconds: int) -> None:
        """Move chain time forward and mine a block (withdraw-delay tests)."""
        self.client.w3.provider.make_request("evm_increaseTime", [int(seconds)])  # type: ignore[arg-type]
        self.client.w3.provider.make_request("evm_mine", [])  # type: ignore[arg-type]


@contextmanager
def channel_devnet() -> Iterator[ChannelDevnet]:
    with LocalChain() as chain:
        devnet = deploy_devnet(chain.rpc_url)
        yield ChannelDevnet(chain=chain, devnet=devnet, client=ChainClient.connect(chain.rpc_url, devnet.token_address))


@dataclass
class SdkStack:
    """The SDK's seller side (resource server + its facilitator) for one receiver."""

    facilitator: Any
    server: Any
    server_scheme: Any
    requirements: Any
    payment_required: Any

    def manager(self) -> Any:
        """The SDK's sync channel manager (claim / settle / refund of the server's channels)."""
        return self.server_scheme.create_channel_manager_sync(self.facilitator, NETWORK)


def sdk_stack(net: ChannelDevnet, seller: LocalAccount, relayer: LocalAccount, price_micro: int) -> SdkStack:
    """The SDK's resource server (seller authorizes its own claims) and its facilitator,
    whose transactions ``relayer`` sends (through our ``ChainFacilitatorSigner``)."""
    from x402 import x402FacilitatorSync, x402ResourceServerSync
    from x402.mechanisms.evm.batch_settlement.authorizer_signer import LocalAuthorizerSigner
    from x402.mechanisms.evm.batch_settlement.facilitator import BatchSettlementEvmFacilitator
    from x402.mechanisms.evm.batch_settlement.server import (
        BatchSettlementEvmScheme,
        BatchSettlementEvmSchemeServerConfig,
    )
    from x402.schemas import AssetAmount, ResourceConfig, ResourceInfo

    from node.chain.channels import ChainFacilitatorSigner

    facilitator = x402FacilitatorSync().register(
        [NETWORK], BatchSettlementEvmFacilitator(ChainFacilitatorSigner(net.client, relayer)))
    server_scheme = BatchSettlementEvmScheme(seller.address, BatchSettlementEvmSchemeServerConfig(
        receiver_authorizer_signer=LocalAuthorizerSigner(seller), withdraw_delay=WITHDRAW_DELAY_S))
    server = x402ResourceServerSync(facilitator)
    server.register(NETWORK, server_scheme)
    server.initialize()
    [requirements] = server.build_payment_requirements(ResourceConfig(
        scheme="batch-settlement", pay_to=seller.address, network=NETWORK,
        price=AssetAmount(amount=str(price_micro), asset=net.devnet.token_address)))
    payment_required = server.create_payment_required_response(
        [requirements], ResourceInfo(url="http://seller.test/skill", description="a skill",
                                     mime_type="application/json"))
    return SdkStack(facilitator, server, server_scheme, requirements, payment_required)


def sdk_client(buyer: LocalAccount, deposit_multiplier: int = 10) -> tuple[Any, Any]:
    """The SDK's x402 client with its batch-settlement client scheme: (client, scheme)."""
    from x402 import x402ClientSync
    from x402.mechanisms.evm.batch_settlement.client import (
        BatchSettlementDepositPolicy,
        BatchSettlementEvmScheme,
        BatchSettlementEvmSchemeOptions,
    )

    scheme = BatchSettlementEvmScheme(buyer, BatchSettlementEvmSchemeOptions(
        deposit_policy=BatchSettlementDepositPolicy(deposit_multiplier=deposit_multiplier)))
    client = x402ClientSync()
    client.register(NETWORK, scheme)
    return client, scheme


def sdk_purchase(stack: SdkStack, client: Any) -> Any:
    """One paid request through the SDK: the client signs (deposit or voucher), the server
    verifies and settles, the client reads the payment response. Returns the SettleResponse."""
    from x402.schemas.hooks import PaymentResponseContext

    payload = client.create_payment_payload(stack.payment_required)
    verdict = stack.server.verify_payment(payload, stack.requirements)
    assert verdict.is_valid, verdict.invalid_reason
    settled = stack.server.settle_payment(payload, stack.requirements)
    client.handle_payment_response(PaymentResponseContext(
        payment_payload=payload, requirements=stack.requirements, settle_response=settled,
        payment_required=stack.payment_required))
    return settled

"""The chain: EIP-3009 authorizations, settlement through web3, payment channels (x402
``batch-settlement`` through the x402 SDK), the local anvil chain, the wallet and the
x402 resource server.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.chain.authorization import Authorization as Authorization
    from node.chain.authorization import sign_authorization as sign_authorization
    from node.chain.channels import CHANNEL_CONTRACT_ADDRESS as CHANNEL_CONTRACT_ADDRESS
    from node.chain.channels import ChannelError as ChannelError
    from node.chain.channels import Channels as Channels
    from node.chain.channels import ChannelState as ChannelState
    from node.chain.channels import SignedVoucher as SignedVoucher
    from node.chain.channels import channel_config as channel_config
    from node.chain.channels import channel_requirements as channel_requirements
    from node.chain.channels import new_salt as new_salt
    from node.chain.channels import sign_channel_voucher as sign_channel_voucher
    from node.chain.channels import sign_deposit as sign_deposit
    from node.chain.channels import voucher_signature_valid as voucher_signature_valid
    from node.chain.client import ChainClient as ChainClient
    from node.chain.contracts import TOKEN_DOMAIN_NAME as TOKEN_DOMAIN_NAME
    from node.chain.contracts import TOKEN_DOMAIN_VERSION as TOKEN_DOMAIN_VERSION
    from node.chain.errors import ChainError as ChainError
    from node.chain.errors import ChainUnavailable as ChainUnavailable
    from node.chain.errors import PaymentRejected as PaymentRejected
    from node.chain.localchain import deploy_devnet as deploy_devnet
    from node.chain.localchain import free_port as free_port
    from node.chain.localchain import fund as fund
    from node.chain.localchain import rpc_url_for as rpc_url_for
    from node.chain.localchain import spawn_anvil as spawn_anvil
    from node.chain.localchain import stop_process as stop_process
    from node.chain.localchain import wait_for_rpc as wait_for_rpc
    from node.chain.settlement import SettlementEngine as SettlementEngine
    from node.chain.wallet import balances as balances
    from node.chain.wallet import load_or_create_wallet as load_or_create_wallet
    from node.chain.wallet import load_wallet as load_wallet
    from node.chain.x402 import payment_requirements as payment_requirements
    from node.chain.x402_channels import ChannelPaymentRefused as ChannelPaymentRefused
    from node.chain.x402_channels import ChannelPayments as ChannelPayments
    from node.chain.x402_server import ChannelRefunded as ChannelRefunded
    from node.chain.x402_server import Offer as Offer
    from node.chain.x402_server import ResourceUnavailable as ResourceUnavailable
    from node.chain.x402_server import Sold as Sold
    from node.chain.x402_server import build_x402_app as build_x402_app
    from node.chain.x402_server import serve_x402 as serve_x402

__getattr__ = face(__name__)

"""The devnet USDC behaves like FiatTokenV2 where crystalmesh and x402 rely on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount

from node.chain.authorization import domain_separator, new_nonce, sign_authorization
from node.chain.contracts import usdc_artifact
from node.chain.embedded import EmbeddedChain, start_embedded_chain


@pytest.fixture(scope="module")
def chain() -> Iterator[EmbeddedChain]:
    yield start_embedded_chain(n_accounts=3)


def token(chain: EmbeddedChain) -> Any:
    return chain.w3.eth.contract(address=chain.token_address, abi=usdc_artifact().abi)  # type: ignore[call-overload]


def transact(chain: EmbeddedChain, sender: LocalAccount, call: Any) -> Any:
    tx = call.build_transaction({"from": sender.address, "gas": 300_000,
                                 "nonce": chain.w3.eth.get_transaction_count(sender.address)})
    signed = sender.sign_transaction(tx)
    return chain.w3.eth.wait_for_transaction_receipt(chain.w3.eth.send_raw_transaction(signed.raw_transaction),
                                                     poll_latency=0.01)


def typed(chain: EmbeddedChain, primary: str, fields: list[tuple[str, str]], message: dict[str, Any]) -> Any:
    return encode_typed_data(full_message={
        "types": {
            "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                             {"name": "chainId", "type": "uint256"},
                             {"name": "verifyingContract", "type": "address"}],
            primary: [{"name": name, "type": kind} for name, kind in fields],
        },
        "primaryType": primary,
        "domain": {"name": "USDC", "version": "2", "chainId": chain.chain_id,
                   "verifyingContract": chain.token_address},
        "message": message,
    })


def test_metadata_and_domain_at_copied_address(chain: EmbeddedChain) -> None:
    usdc = token(chain)
    assert usdc.functions.name().call() == "USDC"
    assert usdc.functions.symbol().call() == "USDC"
    assert usdc.functions.decimals().call() == 6
    assert usdc.functions.version().call() == "2"
    assert usdc.functions.owner().call() == chain.deployer.address
    assert usdc.functions.DOMAIN_SEPARATOR().call() == domain_separator(chain.chain_id, chain.token_address)


def test_only_owner_mints(chain: EmbeddedChain) -> None:
    receipt = transact(chain, chain.accounts[0], token(chain).functions.mint(chain.accounts[0].address, 1))
    assert receipt["status"] == 0


def test_permit(chain: EmbeddedChain) -> None:
    owner, spender = chain.accounts[0], chain.accounts[1]
    usdc = token(chain)
    message = {"owner": owner.address, "spender": spender.address, "value": 123,
               "nonce": usdc.functions.nonces(owner.address).call(), "deadline": 2**255}
    signed = owner.sign_message(typed(chain, "Permit", [("owner", "address"), ("spender", "address"),
                                                        ("value", "uint256"), ("nonce", "uint256"),
                                                        ("deadline", "uint256")], message))
    call = usdc.functions.permit(owner.address, spender.address, 123, 2**255, signed.v,
                                 signed.r.to_bytes(32, "big"), signed.s.to_bytes(32, "big"))
    assert transact(chain, spender, call)["status"] == 1
    assert usdc.functions.allowance(owner.address, spender.address).call() == 123
    assert usdc.functions.nonces(owner.address).call() == message["nonce"] + 1
    # Replaying the same permit fails (nonce moved on).
    assert transact(chain, spender, call)["status"] == 0


def test_bytes_signature_overload_and_events(chain: EmbeddedChain) -> None:
    payer, payee = chain.accounts[0], Account.create()
    usdc = token(chain)
    authorization = sign_authorization(payer, chain_id=chain.chain_id, token_address=chain.token_address,
                                       to=payee.address, value_micro=7)
    transfer = usdc.get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)")
    receipt = transact(chain, chain.accounts[2], transfer(
        payer.address, payee.address, 7, 0, authorization.valid_before_s, authorization.nonce,
        authorization.signature))
    assert receipt["status"] == 1
    used = usdc.events.AuthorizationUsed().process_receipt(receipt)
    assert used[0]["args"]["authorizer"] == payer.address and used[0]["args"]["nonce"] == authorization.nonce
    assert usdc.functions.authorizationState(payer.address, authorization.nonce).call() is True
    assert usdc.functions.balanceOf(payee.address).call() == 7


def test_receive_with_authorization_only_by_payee(chain: EmbeddedChain) -> None:
    payer, payee = chain.accounts[0], chain.accounts[1]
    nonce = new_nonce()
    fields = [("from", "address"), ("to", "address"), ("value", "uint256"), ("validAfter", "uint256"),
              ("validBefore", "uint256"), ("nonce", "bytes32")]
    message = {"from": payer.address, "to": payee.address, "value": 5, "validAfter": 0,
               "validBefore": 2**40, "nonce": nonce}
    signed = payer.sign_message(typed(chain, "ReceiveWithAuthorization", fields, message))
    receive = token(chain).get_function_by_signature(
        "receiveWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)")
    call = receive(payer.address, payee.address, 5, 0, 2**40, nonce, signed.signature)
    assert transact(chain, chain.accounts[2], call)["status"] == 0  # not the payee
    assert transact(chain, payee, call)["status"] == 1


def test_cancel_authorization_blocks_its_use(chain: EmbeddedChain) -> None:
    payer, payee = chain.accounts[0], Account.create()
    usdc = token(chain)
    authorization = sign_authorization(payer, chain_id=chain.chain_id, token_address=chain.token_address,
                                       to=payee.address, value_micro=9)
    cancel_sig = payer.sign_message(typed(chain, "CancelAuthorization",
                                          [("authorizer", "address"), ("nonce", "bytes32")],
                                          {"authorizer": payer.address, "nonce": authorization.nonce}))
    cancel = usdc.get_function_by_signature("cancelAuthorization(address,bytes32,uint8,bytes32,bytes32)")
    receipt = transact(chain, chain.accounts[2], cancel(
        payer.address, authorization.nonce, cancel_sig.v, cancel_sig.r.to_bytes(32, "big"),
        cancel_sig.s.to_bytes(32, "big")))
    assert receipt["status"] == 1
    assert usdc.events.AuthorizationCanceled().process_receipt(receipt)
    transfer = usdc.get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)")
    receipt = transact(chain, chain.accounts[2], transfer(
        payer.address, payee.address, 9, 0, authorization.valid_before_s, authorization.nonce,
        authorization.v, authorization.r, authorization.s))
    assert receipt["status"] == 0
    assert usdc.functions.balanceOf(payee.address).call() == 0

"""EIP-3009 ``TransferWithAuthorization``: build, sign, recover and check, with no I/O.

A buyer pays by signing (EIP-712, domain ``USDC``/``2``, the chain id and the token
address) a message that lets anyone move ``value`` of its USDC to ``to`` once, between
``validAfter`` and ``validBefore``, identified by a random 32-byte ``nonce``. The seller
checks it here, then :mod:`node.chain.settlement` checks the chain and submits it.

Hashing is done by hand (every field is a static 32-byte word) and signing/recovery
with coincurve, because these run once per purchase and once per settlement.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

import coincurve
from eth_hash.auto import keccak
from eth_utils import is_address, to_checksum_address

from node.chain.contracts import TOKEN_DOMAIN_NAME, TOKEN_DOMAIN_VERSION
from node.chain.errors import PaymentRejected

EIP712_DOMAIN_TYPEHASH = keccak(
    b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)
TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak(
    b"TransferWithAuthorization(address from,address to,uint256 value,"
    b"uint256 validAfter,uint256 validBefore,bytes32 nonce)"
)
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
UINT256_MAX = 2**256 - 1
# An authorization must stay valid this long after it is checked, so it can still be mined.
DEFAULT_MIN_VALIDITY_S = 6
DEFAULT_VALID_FOR_S = 3600


def _word(value: int) -> bytes:
    return value.to_bytes(32, "big")


def _address_word(address: str) -> bytes:
    return bytes(12) + bytes.fromhex(address[2:])


def domain_separator(
    chain_id: int,
    token_address: str,
    name: str = TOKEN_DOMAIN_NAME,
    version: str = TOKEN_DOMAIN_VERSION,
) -> bytes:
    return keccak(
        EIP712_DOMAIN_TYPEHASH
        + keccak(name.encode())
        + keccak(version.encode())
        + _word(chain_id)
        + _address_word(token_address)
    )


def new_nonce() -> bytes:
    """A random 32-byte EIP-3009 nonce (USDC does not use sequential nonces)."""
    return secrets.token_bytes(32)


@dataclass(frozen=True)
class Authorization:
    """A signed EIP-3009 TransferWithAuthorization. Money is integer micro-USDC."""

    from_address: str
    to: str
    value_micro: int
    valid_after_s: int
    valid_before_s: int
    nonce: bytes
    signature: bytes  # 65 bytes r || s || v, v in {27, 28}

    def __post_init__(self) -> None:
        if not (is_address(self.from_address) and is_address(self.to)):
            raise PaymentRejected("malformed", "from/to is not an address")
        object.__setattr__(self, "from_address", to_checksum_address(self.from_address))
        object.__setattr__(self, "to", to_checksum_address(self.to))
        for label in ("value_micro", "valid_after_s", "valid_before_s"):
            number = getattr(self, label)
            if not isinstance(number, int) or isinstance(number, bool) or not 0 <= number <= UINT256_MAX:
                raise PaymentRejected("malformed", f"{label} is not a uint256")
        if len(self.nonce) != 32:
            raise PaymentRejected("malformed", "nonce is not 32 bytes")
        if len(self.signature) != 65:
            raise PaymentRejected("malformed", "signature is not 65 bytes")

    # --- identity ---------------------------------------------------------------------
    @property
    def key(self) -> tuple[str, str]:
        """(authorizer, nonce hex): what the token and the settlement ledger key on."""
        return self.from_address, "0x" + self.nonce.hex()

    @property
    def v(self) -> int:
        return self.signature[64]

    @property
    def r(self) -> bytes:
        return self.signature[:32]

    @property
    def s(self) -> bytes:
        return self.signature[32:64]

    # --- EIP-712 ----------------------------------------------------------------------
    def struct_hash(self) -> bytes:
        return keccak(
            TRANSFER_WITH_AUTHORIZATION_TYPEHASH
            + _address_word(self.from_address)
            + _address_word(self.to)
            + _word(self.value_micro)
            + _word(self.valid_after_s)
            + _word(self.valid_before_s)
            + self.nonce
        )

    def digest(self, chain_id: int, token_address: str) -> bytes:
        return keccak(b"\x19\x01" + domain_separator(chain_id, token_address) + self.struct_hash())

    def recover_signer(self, chain_id: int, token_address: str) -> str | None:
        """The address that signed this for ``token_address`` on ``chain_id``, or None.

        Rejects what the token's ECDSA.tryRecover rejects: v not 27/28, s in the upper
        half of the curve order, r or s out of range.
        """
        r = int.from_bytes(self.r, "big")
        s = int.from_bytes(self.s, "big")
        if self.v not in (27, 28) or not (0 < r < SECP256K1_N) or not (0 < s <= SECP256K1_N // 2):
            return None
        recoverable = self.signature[:64] + bytes([self.v - 27])
        try:
            public_key = coincurve.PublicKey.from_signature_and_message(
                recoverable, self.digest(chain_id, token_address), hasher=None
            )
        except Exception:
            return None
        return to_checksum_address(keccak(public_key.format(compressed=False)[1:])[-20:])

    # --- encodings --------------------------------------------------------------------
    def to_wire(self) -> dict[str, Any]:
        """Plain values for the purchase protocol (CBOR): ints and bytes, no floats."""
        return {
            "from": self.from_address,
            "to": self.to,
            "value": self.value_micro,
            "valid_after": self.valid_after_s,
            "valid_before": self.valid_before_s,
            "nonce": self.nonce,
            "signature": self.signature,
        }

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Authorization:
        try:
            return cls(
                from_address=str(body["from"]),
                to=str(body["to"]),
                value_micro=body["value"],
                valid_after_s=body["valid_after"],
                valid_before_s=body["valid_before"],
                nonce=bytes(body["nonce"]),
                signature=bytes(body["signature"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PaymentRejected("malformed", str(exc)) from exc

    def to_x402_payload(self) -> dict[str, Any]:
        """The inner payload of an x402 ``exact`` EVM payment (EIP-3009 variant)."""
        return {
            "authorization": {
                "from": self.from_address,
                "to": self.to,
                "value": str(self.value_micro),
                "validAfter": str(self.valid_after_s),
                "validBefore": str(self.valid_before_s),
                "nonce": "0x" + self.nonce.hex(),
            },
            "signature": "0x" + self.signature.hex(),
        }

    @classmethod
    def from_x402_payload(cls, payload: dict[str, Any]) -> Authorization:
        """Accept an x402 ``exact`` EVM payload (a 65-byte EOA signature)."""
        try:
            fields = payload["authorization"]
            signature = bytes.fromhex(str(payload["signature"]).removeprefix("0x"))
            if len(signature) == 65 and signature[64] in (0, 1):
                signature = signature[:64] + bytes([signature[64] + 27])
            return cls(
                from_address=str(fields["from"]),
                to=str(fields["to"]),
                value_micro=int(fields["value"]),
                valid_after_s=int(fields["validAfter"]),
                valid_before_s=int(fields["validBefore"]),
                nonce=bytes.fromhex(str(fields["nonce"]).removeprefix("0x")),
                signature=signature,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PaymentRejected("malformed", str(exc)) from exc


def _private_key_bytes(key: Any) -> bytes:
    """Accept raw bytes, a hex string or an eth-account LocalAccount."""
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return bytes.fromhex(key.removeprefix("0x"))
    return bytes(key.key)


def sign_authorization(
    private_key: Any,
    *,
    chain_id: int,
    token_address: str,
    to: str,
    value_micro: int,
    valid_after_s: int = 0,
    valid_before_s: int | None = None,
    valid_for_s: int = DEFAULT_VALID_FOR_S,
    nonce: bytes | None = None,
    now_s: int | None = None,
) -> Authorization:
    """Buyer side: sign a payment of ``value_micro`` to ``to`` with a fresh random nonce."""
    secret = coincurve.PrivateKey(_private_key_bytes(private_key))
    from_address = to_checksum_address(keccak(secret.public_key.format(compressed=False)[1:])[-20:])
    if valid_before_s is None:
        valid_before_s = (int(time.time()) if now_s is None else now_s) + valid_for_s
    unsigned = Authorization(
        from_address=from_address,
        to=to,
        value_micro=value_micro,
        valid_after_s=valid_after_s,
        valid_before_s=valid_before_s,
        nonce=nonce if nonce is not None else new_nonce(),
        signature=bytes(65),
    )
    recoverable = secret.sign_recoverable(unsigned.digest(chain_id, token_address), hasher=None)
    signature = recoverable[:64] + bytes([recoverable[64] + 27])
    return Authorization(
        from_address=unsigned.from_address,
        to=unsigned.to,
        value_micro=unsigned.value_micro,
        valid_after_s=unsigned.valid_after_s,
        valid_before_s=unsigned.valid_before_s,
        nonce=unsigned.nonce,
        signature=signature,
    )


def check_authorization(
    authorization: Authorization,
    *,
    chain_id: int,
    token_address: str,
    pay_to: str,
    price_micro: int,
    now_s: int | None = None,
    min_validity_s: int = DEFAULT_MIN_VALIDITY_S,
) -> None:
    """Seller side, off-chain part: raise :class:`PaymentRejected` unless the
    authorization pays exactly ``price_micro`` to ``pay_to``, is valid now (and for
    ``min_validity_s`` more) and is signed by its ``from`` address.

    The on-chain part (nonce unused, balance) is :meth:`SettlementEngine.verify`.
    """
    now = int(time.time()) if now_s is None else now_s
    if authorization.to.lower() != pay_to.lower():
        raise PaymentRejected("wrong_payee", f"pays {authorization.to}, expected {pay_to}")
    if authorization.value_micro != price_micro:
        raise PaymentRejected(
            "wrong_amount", f"pays {authorization.value_micro}, expected {price_micro} micro-USDC"
        )
    if authorization.valid_after_s >= now:
        raise PaymentRejected("not_yet_valid", f"valid after {authorization.valid_after_s}, now {now}")
    if authorization.valid_before_s <= now + min_validity_s:
        raise PaymentRejected("expired", f"valid before {authorization.valid_before_s}, now {now}")
    signer = authorization.recover_signer(chain_id, token_address)
    if signer is None or signer != authorization.from_address:
        raise PaymentRejected("bad_signature", f"signed by {signer}, claims {authorization.from_address}")

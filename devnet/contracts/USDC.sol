// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";

/// @title USDC-like token for the crystalmesh devnet.
/// @notice Behaves like Circle's FiatTokenV2_2 where crystalmesh and x402 look:
///   6 decimals, EIP-712 domain name "USDC" version "2", EIP-2612 permit,
///   EIP-3009 transferWithAuthorization / receiveWithAuthorization /
///   cancelAuthorization with random bytes32 nonces, both (v,r,s) and
///   `bytes signature` overloads, and FiatTokenV2's revert strings.
/// @dev No immutables: the devnet copies this runtime code to Base Sepolia's
///   USDC address (anvil_setCode / genesis state), so the EIP-712 domain
///   separator is computed from block.chainid and address(this) on every
///   call, and name/symbol are constants rather than constructor storage.
///   The only storage that must be carried over is `owner`.
contract USDC is ERC20 {
    string private constant TOKEN_NAME = "USDC";
    string private constant TOKEN_VERSION = "2";

    bytes32 private constant EIP712_DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("USDC");
    bytes32 private constant VERSION_HASH = keccak256("2");
    bytes32 public constant PERMIT_TYPEHASH =
        keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");
    bytes32 public constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant RECEIVE_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant CANCEL_AUTHORIZATION_TYPEHASH =
        keccak256("CancelAuthorization(address authorizer,bytes32 nonce)");

    address public owner;
    mapping(address authorizer => mapping(bytes32 nonce => bool used)) private _authorizationStates;
    mapping(address account => uint256 nonce) private _permitNonces;

    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    constructor(address owner_) ERC20(TOKEN_NAME, TOKEN_NAME) {
        owner = owner_;
        emit OwnershipTransferred(address(0), owner_);
    }

    modifier onlyOwner() {
        require(msg.sender == owner, "Ownable: caller is not the owner");
        _;
    }

    // --- ERC-20 metadata (constants so copied code needs no storage) ---------------------

    function name() public pure override returns (string memory) {
        return TOKEN_NAME;
    }

    function symbol() public pure override returns (string memory) {
        return TOKEN_NAME;
    }

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function version() external pure returns (string memory) {
        return TOKEN_VERSION;
    }

    // --- owner ---------------------------------------------------------------------------

    function mint(address to, uint256 amount) external onlyOwner returns (bool) {
        _mint(to, amount);
        return true;
    }

    function transferOwnership(address newOwner) external onlyOwner {
        require(newOwner != address(0), "Ownable: new owner is the zero address");
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    // --- EIP-712 -------------------------------------------------------------------------

    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(abi.encode(EIP712_DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
    }

    function _digest(bytes32 structHash) private view returns (bytes32) {
        return keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash));
    }

    function _requireSignedBy(address signer, bytes32 digest, uint8 v, bytes32 r, bytes32 s) private pure {
        (address recovered, ECDSA.RecoverError error,) = ECDSA.tryRecover(digest, v, r, s);
        require(error == ECDSA.RecoverError.NoError && recovered == signer, "FiatTokenV2: invalid signature");
    }

    function _requireSignedBy(address signer, bytes32 digest, bytes memory signature) private view {
        require(SignatureChecker.isValidSignatureNow(signer, digest, signature), "FiatTokenV2: invalid signature");
    }

    // --- EIP-2612 permit -----------------------------------------------------------------

    function nonces(address account) external view returns (uint256) {
        return _permitNonces[account];
    }

    function permit(
        address owner_,
        address spender,
        uint256 value,
        uint256 deadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _requireSignedBy(owner_, _usePermitNonce(owner_, spender, value, deadline), v, r, s);
        _approve(owner_, spender, value);
    }

    function permit(address owner_, address spender, uint256 value, uint256 deadline, bytes memory signature)
        external
    {
        _requireSignedBy(owner_, _usePermitNonce(owner_, spender, value, deadline), signature);
        _approve(owner_, spender, value);
    }

    function _usePermitNonce(address owner_, address spender, uint256 value, uint256 deadline)
        private
        returns (bytes32)
    {
        require(deadline == type(uint256).max || deadline >= block.timestamp, "FiatTokenV2: permit is expired");
        uint256 nonce = _permitNonces[owner_]++;
        return _digest(keccak256(abi.encode(PERMIT_TYPEHASH, owner_, spender, value, nonce, deadline)));
    }

    // --- EIP-3009 ------------------------------------------------------------------------

    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool) {
        return _authorizationStates[authorizer][nonce];
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        bytes32 digest =
            _authorizationDigest(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce);
        _requireSignedBy(from, digest, v, r, s);
        _useAuthorization(from, nonce);
        _transferChecked(from, to, value);
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external {
        bytes32 digest =
            _authorizationDigest(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce);
        _requireSignedBy(from, digest, signature);
        _useAuthorization(from, nonce);
        _transferChecked(from, to, value);
    }

    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        require(to == msg.sender, "FiatTokenV2: caller must be the payee");
        bytes32 digest =
            _authorizationDigest(RECEIVE_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce);
        _requireSignedBy(from, digest, v, r, s);
        _useAuthorization(from, nonce);
        _transferChecked(from, to, value);
    }

    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external {
        require(to == msg.sender, "FiatTokenV2: caller must be the payee");
        bytes32 digest =
            _authorizationDigest(RECEIVE_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce);
        _requireSignedBy(from, digest, signature);
        _useAuthorization(from, nonce);
        _transferChecked(from, to, value);
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external {
        _requireUnusedAuthorization(authorizer, nonce);
        _requireSignedBy(authorizer, _cancelDigest(authorizer, nonce), v, r, s);
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationCanceled(authorizer, nonce);
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, bytes memory signature) external {
        _requireUnusedAuthorization(authorizer, nonce);
        _requireSignedBy(authorizer, _cancelDigest(authorizer, nonce), signature);
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationCanceled(authorizer, nonce);
    }

    function _cancelDigest(address authorizer, bytes32 nonce) private view returns (bytes32) {
        return _digest(keccak256(abi.encode(CANCEL_AUTHORIZATION_TYPEHASH, authorizer, nonce)));
    }

    /// @dev Checks the validity window too, so every path reverts with FiatTokenV2's reason.
    function _authorizationDigest(
        bytes32 typehash,
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce
    ) private view returns (bytes32) {
        require(block.timestamp > validAfter, "FiatTokenV2: authorization is not yet valid");
        require(block.timestamp < validBefore, "FiatTokenV2: authorization is expired");
        _requireUnusedAuthorization(from, nonce);
        return _digest(keccak256(abi.encode(typehash, from, to, value, validAfter, validBefore, nonce)));
    }

    function _requireUnusedAuthorization(address authorizer, bytes32 nonce) private view {
        require(!_authorizationStates[authorizer][nonce], "FiatTokenV2: authorization is used or canceled");
    }

    function _useAuthorization(address authorizer, bytes32 nonce) private {
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationUsed(authorizer, nonce);
    }

    /// @dev FiatTokenV2's revert string (x402 and the settlement engine map it to
    ///   "insufficient balance"); OpenZeppelin's custom error would be opaque to them.
    function _transferChecked(address from, address to, uint256 value) private {
        require(balanceOf(from) >= value, "ERC20: transfer amount exceeds balance");
        unchecked {
            _transfer(from, to, value);
        }
    }
}

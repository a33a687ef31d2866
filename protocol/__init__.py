"""crystalmesh wire protocol: pure code a foreign client can be written from.

Modules: ``codec`` (canonical CBOR), ``identity`` (Ed25519, peer ids),
``envelope`` (signed envelopes), ``messages`` / ``purchase`` (message bodies),
``schema`` (the field validators behind them), ``topics`` (gossip topics and
the purchase protocol id), ``payment`` (EIP-3009 typed data).
See docs/protocol.md for the specification.
"""

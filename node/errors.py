"""One error tree for the node: each error knows its HTTP status and CLI exit code.

The API maps an exception to a response by these attributes (``http_status``,
``code``), the CLI to one ``error: …`` line and ``exit_code``, never by class
names. Concept errors (``CrystalNotFound``, ``PaymentRejected``,
``PurchaseRefused``, …) live near their concept; the ones that belong to no
single concept live here.
"""

from __future__ import annotations


class CrystalmeshError(Exception):
    """Base of the node's own errors: a user-facing problem, described in one line."""

    http_status = 400
    exit_code = 1
    code = "bad_request"


class NodeError(CrystalmeshError, RuntimeError):
    """A request the node cannot carry out as asked (bad value, unknown item)."""


class NotManagementNode(NodeError):
    """Only a management node (its key in ``net.management_keys``) may do this."""

    http_status = 403
    code = "not_management"

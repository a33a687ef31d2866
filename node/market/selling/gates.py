"""Quality gates a crystal must pass before it can be listed (seed 000).

Seed: "Skills must pass quality gates before listing: minimum 3 executions and
60% success rate." Only knowledge crystals (skill, task_pattern) are listable,
and private or confidential material never leaves the node.
"""

from __future__ import annotations

from enum import StrEnum

from node.config import MarketConfig
from node.crystals import KNOWLEDGE_TYPES, LOCAL_ONLY_SCOPES, Crystal, Lifecycle, Sensitivity
from node.errors import CrystalmeshError

DEFAULT_MIN_EXECUTIONS = MarketConfig.min_executions
DEFAULT_MIN_SUCCESS_RATE = MarketConfig.min_success_rate


class ListingRejection(StrEnum):
    WRONG_TYPE = "wrong_type"
    LIFECYCLE = "lifecycle"
    DEPRECATED = "deprecated"
    SCOPE = "scope"
    SENSITIVITY = "sensitivity"
    TOO_FEW_EXECUTIONS = "too_few_executions"
    LOW_SUCCESS_RATE = "low_success_rate"


class NotListable(CrystalmeshError):
    http_status = 409
    code = "not_listable"

    """The crystal cannot be put on the marketplace; ``str()`` is the user-facing reason."""

    def __init__(self, code: ListingRejection, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def check_listable(
    crystal: Crystal,
    min_executions: int = DEFAULT_MIN_EXECUTIONS,
    min_success_rate: float = DEFAULT_MIN_SUCCESS_RATE,
) -> None:
    """Raise :class:`NotListable` with the first reason ``crystal`` may not be listed."""
    name = f"crystal {crystal.id}"
    if crystal.semantic_type not in KNOWLEDGE_TYPES:
        raise NotListable(
            ListingRejection.WRONG_TYPE,
            f"{name} is of type {crystal.semantic_type.value}; "
            "only skill and task_pattern crystals can be listed",
        )
    if crystal.lifecycle in (Lifecycle.EXPIRED, Lifecycle.ARCHIVED):
        raise NotListable(
            ListingRejection.LIFECYCLE,
            f"{name} is {crystal.lifecycle.value}; only live crystals can be listed",
        )
    if crystal.deprecated:
        successor = f" by {crystal.deprecated_by}" if crystal.deprecated_by else ""
        raise NotListable(
            ListingRejection.DEPRECATED,
            f"{name} is deprecated (superseded{successor}); list the newest version instead",
        )
    scope = crystal.governance.access_scope
    if scope in LOCAL_ONLY_SCOPES:
        raise NotListable(
            ListingRejection.SCOPE,
            f"{name} has {scope.value} scope and never leaves this node; "
            "change its scope to shared or public to list it",
        )
    if crystal.governance.sensitivity == Sensitivity.CONFIDENTIAL:
        raise NotListable(
            ListingRejection.SENSITIVITY,
            f"{name} looks like it contains secrets (confidential sensitivity); "
            "remove them before listing",
        )
    stats = crystal.execution
    if stats.executions < min_executions:
        raise NotListable(
            ListingRejection.TOO_FEW_EXECUTIONS,
            f"{name} has {stats.executions} execution{'s' if stats.executions != 1 else ''}, "
            f"needs {min_executions}",
        )
    if stats.success_rate < min_success_rate:
        raise NotListable(
            ListingRejection.LOW_SUCCESS_RATE,
            f"{name} succeeded in {stats.successes} of {stats.executions} executions "
            f"({stats.success_rate:.0%}), needs at least {min_success_rate:.0%}",
        )


def is_listable(
    crystal: Crystal,
    min_executions: int = DEFAULT_MIN_EXECUTIONS,
    min_success_rate: float = DEFAULT_MIN_SUCCESS_RATE,
) -> bool:
    try:
        check_listable(crystal, min_executions, min_success_rate)
    except NotListable:
        return False
    return True

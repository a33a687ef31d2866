import pytest

from node.crystals.model import (
    AccessScope,
    Crystal,
    ExecutionStats,
    Governance,
    Lifecycle,
    SemanticType,
    Sensitivity,
)
from node.market.selling.gates import ListingRejection, NotListable, check_listable, is_listable


def skill(**changes) -> Crystal:
    base = Crystal(
        text="run pytest with -x",
        id="skill-1",
        semantic_type=SemanticType.SKILL,
        lifecycle=Lifecycle.FROZEN,
        governance=Governance(access_scope=AccessScope.SHARED),
        execution=ExecutionStats(executions=5, successes=4, reward_sum=3.5),
    )
    for name, value in changes.items():
        setattr(base, name, value)
    return base


def rejection(crystal: Crystal) -> NotListable:
    with pytest.raises(NotListable) as caught:
        check_listable(crystal)
    return caught.value


def test_a_good_skill_is_listable() -> None:
    check_listable(skill())
    assert is_listable(skill(semantic_type=SemanticType.TASK_PATTERN))
    assert is_listable(skill(governance=Governance(access_scope=AccessScope.PUBLIC)))


def test_memory_crystals_are_not_listable() -> None:
    error = rejection(skill(semantic_type=SemanticType.EPISODE))
    assert error.code == ListingRejection.WRONG_TYPE
    assert str(error) == (
        "crystal skill-1 is of type episode; only skill and task_pattern crystals can be listed"
    )


@pytest.mark.parametrize("scope", [AccessScope.PRIVATE, AccessScope.CONFIDENTIAL])
def test_local_only_scopes_are_not_listable(scope: AccessScope) -> None:
    error = rejection(skill(governance=Governance(access_scope=scope)))
    assert error.code == ListingRejection.SCOPE
    assert f"{scope.value} scope" in str(error)


def test_confidential_sensitivity_is_not_listable() -> None:
    governance = Governance(access_scope=AccessScope.PUBLIC, sensitivity=Sensitivity.CONFIDENTIAL)
    assert rejection(skill(governance=governance)).code == ListingRejection.SENSITIVITY


def test_too_few_executions() -> None:
    error = rejection(skill(execution=ExecutionStats(executions=2, successes=2, reward_sum=2)))
    assert error.code == ListingRejection.TOO_FEW_EXECUTIONS
    assert str(error) == "crystal skill-1 has 2 executions, needs 3"
    one = rejection(skill(execution=ExecutionStats(executions=1, successes=1)))
    assert "has 1 execution, needs 3" in str(one)


def test_success_rate_boundary() -> None:
    # 3/5 = 0.6 is exactly the minimum and passes; 2/4 = 0.5 fails
    check_listable(skill(execution=ExecutionStats(executions=5, successes=3)))
    error = rejection(skill(execution=ExecutionStats(executions=4, successes=2)))
    assert error.code == ListingRejection.LOW_SUCCESS_RATE
    assert str(error) == (
        "crystal skill-1 succeeded in 2 of 4 executions (50%), needs at least 60%"
    )


def test_deprecated_is_not_listable() -> None:
    error = rejection(skill(deprecated=True, deprecated_by="skill-stable-2"))
    assert error.code == ListingRejection.DEPRECATED
    assert "superseded by skill-stable-2" in str(error)


@pytest.mark.parametrize("lifecycle", [Lifecycle.EXPIRED, Lifecycle.ARCHIVED])
def test_dead_lifecycles_are_not_listable(lifecycle: Lifecycle) -> None:
    error = rejection(skill(lifecycle=lifecycle))
    assert error.code == ListingRejection.LIFECYCLE
    assert lifecycle.value in str(error)


def test_thresholds_are_configurable() -> None:
    crystal = skill(execution=ExecutionStats(executions=5, successes=4))
    assert not is_listable(crystal, min_executions=10)
    assert not is_listable(crystal, min_success_rate=0.9)
    assert is_listable(crystal, min_executions=5, min_success_rate=0.8)


def test_checking_does_not_change_the_crystal() -> None:
    crystal = skill(execution=ExecutionStats(executions=1, successes=0))
    before = crystal.to_dict()
    assert not is_listable(crystal)
    assert crystal.to_dict() == before

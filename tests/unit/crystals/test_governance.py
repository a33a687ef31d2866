import pytest

from node.crystals.governance import (
    Requester,
    can_access,
    classify_sensitivity,
    default_scope_for,
    lifespan_expired,
)
from node.crystals.model import (
    AccessScope,
    Governance,
    Lifecycle,
    LifespanPolicy,
    SemanticType,
    Sensitivity,
)

LIVE = Lifecycle.ACTIVATED


@pytest.mark.parametrize(
    ("scope", "local", "session", "peer", "anonymous"),
    [
        (AccessScope.CONFIDENTIAL, True, False, False, False),
        (AccessScope.PRIVATE, True, False, False, False),
        (AccessScope.SHARED, True, True, False, False),
        (AccessScope.PUBLIC, True, True, True, True),
    ],
)
def test_access_table(
    scope: AccessScope, local: bool, session: bool, peer: bool, anonymous: bool
) -> None:
    assert can_access(scope, LIVE, Requester.LOCAL_AGENT) is local
    assert can_access(scope, LIVE, "authenticated_session") is session
    assert can_access(scope, LIVE, "peer") is peer
    assert can_access(scope, LIVE, "anonymous") is anonymous


@pytest.mark.parametrize("scope", list(AccessScope))
@pytest.mark.parametrize("requester", list(Requester))
def test_expired_is_never_accessible(scope: AccessScope, requester: Requester) -> None:
    assert can_access(scope, Lifecycle.EXPIRED, requester) is False


def test_unknown_requester_gets_nothing() -> None:
    assert can_access(AccessScope.PUBLIC, LIVE, "root") is False


CONFIDENTIAL = [
    "password: hunter2",
    "my password is correct-horse",
    "db_password = 'S3cretValue!'",
    "DB_PASSWORD=hunter22",
    'PASSWORD="tr0ub4dor"',
    "export OPENAI_API_KEY=sk-proj-AbCdEf0123456789AbCdEf0123",
    "anthropic key sk-ant-api03-abcdefghijklmnopqrstuvwx",
    "aws id AKIAIOSFODNN7EXAMPLE",
    "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "slack xoxb-123456789012-abcdefghij",
    "api_key: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "secret=dGhpcyBpcyBhIHNlY3JldCB2YWx1ZTEy",
    "Authorization token abc123def456ghi789jkl",
    "GITHUB_TOKEN=Xk9aB3qP7zz0LmN4rT8y",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----",
    "wallet key 0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318",
    "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop",
]

PERSONAL = [
    "reach me at alice.smith@example.com",
    "call 415-555-0132 after six",
    "my number is (415) 555-0132",
    "office: +49 30 1234 5678",
    "Hi, my name is Alice",
    "I feel like nobody reads my code",
    "I'm so anxious about the review",
    "I am really stressed this week",
    "my therapist suggested journaling",
    "In my opinion tabs are better",
    "I live in Lisbon",
]

NORMAL = [
    "token bucket rate limiter with a refill rate of 100/s",
    "the auth token is refreshed every 3600 seconds",
    "def login(user: str, password: str) -> Session:",
    "password = getpass.getpass()",
    "password = self.password",
    "Rotate secrets every 90 days; never log the API key.",
    "Use a password manager and enable 2FA.",
    "git clone git@github.com:org/repo.git",
    "pip install requests==2.31.0 and numpy 1.26.4",
    "@pytest.fixture decorates a function",
    "server at 10.0.0.1:8080, version 1.2.3",
    "the sha256 of the file is used for dedup",
    "Fixed the bug; the team shipped release 2024-01-15.",
    "I think the index is stale",
    "error: connection refused on port 5432",
    "tokenizer splits text into tokens",
    "OAuth2 client_credentials_grant_v2 flow",
    "set token_refresh_interval_v2 to 30",
    "secret_rotation_days_90 is a setting",
    "MY_SECRET_NAME_V2 is read from the environment",
]


@pytest.mark.parametrize("text", CONFIDENTIAL)
def test_confidential_examples(text: str) -> None:
    assert classify_sensitivity(text) == Sensitivity.CONFIDENTIAL


@pytest.mark.parametrize("text", PERSONAL)
def test_personal_examples(text: str) -> None:
    assert classify_sensitivity(text) == Sensitivity.PERSONAL


@pytest.mark.parametrize("text", NORMAL)
def test_normal_examples(text: str) -> None:
    assert classify_sensitivity(text) == Sensitivity.NORMAL


def test_confidential_wins_over_personal() -> None:
    assert classify_sensitivity("my name is Bob, password: hunter2") == Sensitivity.CONFIDENTIAL


@pytest.mark.parametrize(
    ("sensitivity", "semantic_type", "scope"),
    [
        (Sensitivity.CONFIDENTIAL, SemanticType.SKILL, AccessScope.CONFIDENTIAL),
        (Sensitivity.CONFIDENTIAL, SemanticType.FACT, AccessScope.CONFIDENTIAL),
        (Sensitivity.PERSONAL, SemanticType.TASK_PATTERN, AccessScope.PRIVATE),
        (Sensitivity.PERSONAL, SemanticType.EPISODE, AccessScope.PRIVATE),
        (Sensitivity.NORMAL, SemanticType.SKILL, AccessScope.SHARED),
        (Sensitivity.NORMAL, SemanticType.TASK_PATTERN, AccessScope.SHARED),
        (Sensitivity.NORMAL, SemanticType.FACT, AccessScope.PRIVATE),
        (Sensitivity.NORMAL, SemanticType.GENERAL, AccessScope.PRIVATE),
    ],
)
def test_default_scope(
    sensitivity: Sensitivity, semantic_type: SemanticType, scope: AccessScope
) -> None:
    assert default_scope_for(sensitivity, semantic_type) == scope


def test_ttl_lifespan() -> None:
    ttl = Governance(lifespan_policy=LifespanPolicy.TTL, ttl_ms=1_000)
    # created at 5_000, ttl 1_000 → expires at 6_000 (inclusive)
    assert lifespan_expired(ttl, 5_000, 5_999) is False
    assert lifespan_expired(ttl, 5_000, 6_000) is True
    assert lifespan_expired(Governance(lifespan_policy=LifespanPolicy.TTL), 0, 10**12) is False


@pytest.mark.parametrize("policy", [LifespanPolicy.PERMANENT, LifespanPolicy.DECAY])
def test_non_ttl_policies_never_lifespan_expire(policy: LifespanPolicy) -> None:
    assert lifespan_expired(Governance(lifespan_policy=policy, ttl_ms=1), 0, 10**12) is False

"""The failed sign-ins' throttle: counts per key and address, refusals that grow and end."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from mirror.auth.throttle import Door, Refusal, SignInThrottle, ThrottleRules, sign_in_attempt

RULES = ThrottleRules(threshold=3, address_threshold=5, window=100.0, max_delay=8.0)
KEY, OTHER = "AKIAVICTIM", "AKIAOTHER"
HERE, THERE = "10.0.0.1", "10.0.0.2"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def throttle(clock: Clock) -> SignInThrottle:
    return SignInThrottle(RULES, clock=clock)


def fail(throttle: SignInThrottle, times: int, key: str = KEY, client: str = HERE) -> list[Refusal]:
    started = [throttle.failed(key, client, "api") for _ in range(times)]
    return [r for r in started if r is not None]


def test_a_pair_is_refused_past_the_threshold_and_not_elsewhere(
    throttle: SignInThrottle, clock: Clock
) -> None:
    assert fail(throttle, 2) == []
    assert throttle.check(KEY, HERE) is None
    assert fail(throttle, 1) == [Refusal(1.0, "key")]
    assert throttle.check(KEY, HERE) == Refusal(1.0, "key")
    # the same key from another address, and another key from here, are not refused
    assert throttle.check(KEY, THERE) is None
    assert throttle.check(OTHER, HERE) is None
    clock.now += 1.0
    assert throttle.check(KEY, HERE) is None


def test_the_refusal_doubles_with_each_failure_up_to_the_cap(
    throttle: SignInThrottle, clock: Clock
) -> None:
    delays = []
    for _ in range(7):
        (refusal,) = fail(throttle, 1) or [None]  # the first two start nothing
        if refusal is not None:
            delays.append(refusal.retry_after)
            clock.now += refusal.retry_after
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert Refusal(0.2, "key").seconds == 1 and Refusal(2.5, "key").seconds == 3


def test_a_success_clears_the_pair(throttle: SignInThrottle) -> None:
    fail(throttle, 2)
    throttle.succeeded(KEY, HERE)
    assert fail(throttle, 2) == []
    assert throttle.check(KEY, HERE) is None


def test_counts_start_over_after_the_window(throttle: SignInThrottle, clock: Clock) -> None:
    fail(throttle, 2)
    clock.now += RULES.window + 1
    assert fail(throttle, 2) == []
    assert throttle.check(KEY, HERE) is None


def test_an_address_trying_many_keys_is_refused_except_for_keys_that_signed_in_there(
    throttle: SignInThrottle,
) -> None:
    throttle.succeeded("AKIAREGULAR", HERE)
    started = [throttle.failed(f"AKIAGUESS{i}", HERE, "gateway") for i in range(5)]
    assert started[:4] == [None] * 4 and started[4] == Refusal(1.0, "address")
    assert throttle.check("AKIANEW", HERE) == Refusal(1.0, "address")
    # a key in use from that address goes on; any key from elsewhere too
    assert throttle.check("AKIAREGULAR", HERE) is None
    assert throttle.check("AKIANEW", THERE) is None


def test_the_maps_stay_bounded(clock: Clock) -> None:
    small = SignInThrottle(ThrottleRules(threshold=2, max_entries=10), clock=clock)
    for i in range(1000):
        small.failed(f"AKIA{i}", f"10.0.{i // 250}.{i % 250}", "api")
        small.succeeded(f"AKIAOK{i}", "10.9.9.9")
    assert len(small._pairs) == len(small._addresses) == len(small._trusted) == 10


def test_the_log_names_the_key_the_client_and_the_door_only(throttle: SignInThrottle) -> None:
    with capture_logs() as events:
        fail(throttle, 3)
    (event,) = events
    assert event == {
        "event": "sign-in attempts refused for a while",
        "log_level": "warning",
        "access_key_id": KEY,
        "client": HERE,
        "door": "api",
        "scope": "key",
        "failures": 3,
        "retry_after": 1.0,
    }


class Wrong(Exception):
    """A failed sign-in at the test's door."""


class Refused(Exception):
    """The test's door refusing an attempt."""


class Malformed(Wrong):
    """A failure that guesses nothing."""


DOOR: Door[Wrong] = Door(
    "test",
    Wrong,
    refused=lambda refusal: Refused(refusal.reason),
    delayed=lambda exc, refusal: Refused(f"{exc}; {refusal.seconds}"),
    guessed=lambda exc: not isinstance(exc, Malformed),
)


def attempt(throttle: SignInThrottle, error: Exception | None, *, succeed: bool = False) -> None:
    with sign_in_attempt(throttle, KEY, HERE, DOOR) as signing_in:
        if error is not None:
            raise error
        if succeed:
            signing_in.succeeded()


def test_an_attempt_counts_guesses_answers_the_refusal_it_starts_and_refuses_the_next(
    throttle: SignInThrottle,
) -> None:
    for _ in range(RULES.threshold - 1):
        with pytest.raises(Wrong):
            attempt(throttle, Wrong("wrong secret"))
    for _ in range(3):
        with pytest.raises(Malformed):  # not a guess: not counted
            attempt(throttle, Malformed("no date"))
    with pytest.raises(Refused, match=r"^wrong secret; 1$"):
        attempt(throttle, Wrong("wrong secret"))
    ran = []
    with pytest.raises(Refused, match="too many failed sign-ins for this access key from"):
        with sign_in_attempt(throttle, KEY, HERE, DOOR):
            ran.append(True)
    assert ran == []  # refused before the secret is looked at


def test_only_a_reported_success_clears_the_pair(throttle: SignInThrottle, clock: Clock) -> None:
    for _ in range(RULES.threshold - 1):
        with pytest.raises(Wrong):
            attempt(throttle, Wrong("wrong secret"))
    attempt(throttle, None)  # the block ended without verifying a secret
    with pytest.raises(Refused):
        attempt(throttle, Wrong("wrong secret"))
    throttle2 = SignInThrottle(RULES, clock=clock)
    for _ in range(RULES.threshold - 1):
        with pytest.raises(Wrong):
            attempt(throttle2, Wrong("wrong secret"))
    attempt(throttle2, None, succeed=True)
    with pytest.raises(Wrong):
        attempt(throttle2, Wrong("wrong secret"))


def test_no_throttle_checks_and_counts_nothing() -> None:
    for _ in range(RULES.threshold * 3):
        with pytest.raises(Wrong), sign_in_attempt(None, KEY, HERE, DOOR) as signing_in:
            signing_in.succeeded()
            raise Wrong("wrong secret")

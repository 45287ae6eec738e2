"""Failed sign-ins, counted per access key and client address, refused for a while past a limit.

The front doors (the REST API's HTTP Basic, ``POST /auth/login``, the S3 gateway's signatures)
go through :func:`sign_in_attempt`: it asks :meth:`SignInThrottle.check` before the secret is
looked at and reports a failure with :meth:`~SignInThrottle.failed`; the door reports a success
(:meth:`SignInAttempt.succeeded`). Failures are counted for
the pair (access key ID, client address) and for the client address alone, never for the key
alone: someone failing with a key from one address never locks the key out for another address.

Past ``threshold`` failures of a pair, or ``address_threshold`` failures from an address, every
attempt of that pair (or from that address) is refused at once, without looking at its secret,
for a delay that starts at ``base_delay`` seconds and doubles with each further failure up to
``max_delay``; the answer is the door's usual refusal, with ``Retry-After``. Refusing, rather
than answering a failure late, is what slows a guesser down: a right guess would be answered at
once, so a client that does not wait for failures (a short timeout, many attempts in parallel)
would learn as fast as ever; a refusal gives nothing to learn, costs no scrypt or HMAC work,
and holds no connection open. A key that signed in from an address within ``trusted_for``
seconds is not refused for that address's failures (a shared address, a NAT or a proxy, does
not lock out the keys already in use there), only for its own.

A count starts over ``window`` seconds after its first failure; a success clears its pair.
Counts live in memory, per process (each worker of ``server.workers`` counts alone), in maps
bounded to ``max_entries`` (the least recently touched entries go first).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from mirror.logging import get_logger

__all__ = [
    "Door",
    "Refusal",
    "SignInAttempt",
    "SignInThrottle",
    "ThrottleRules",
    "sign_in_attempt",
]

Scope = Literal["key", "address"]

log = get_logger("mirror.auth.throttle")


@dataclass(frozen=True)
class ThrottleRules:
    """When failed sign-ins are refused, and for how long (see the module's docstring)."""

    threshold: int = 10
    """Failures of one (access key ID, client address) pair before its attempts are refused."""
    address_threshold: int = 100
    """Failures from one client address, whatever the keys, before its attempts are refused."""
    window: float = 600.0
    """Seconds after a count's first failure when it starts over."""
    base_delay: float = 1.0
    """Seconds the first refusal lasts; each further failure doubles it."""
    max_delay: float = 60.0
    """Seconds a refusal lasts at most."""
    trusted_for: float = 86_400.0
    """Seconds a key that signed in from an address stays exempt from that address's refusal."""
    max_entries: int = 100_000
    """Pairs, addresses and trusted pairs each kept at most."""


@dataclass(frozen=True)
class Refusal:
    """Attempts of a pair or an address are refused for a while.

    Attributes:
        retry_after: Seconds until they are looked at again.
        scope: ``key`` (this key from this address) or ``address`` (anything from it).
    """

    retry_after: float
    scope: Scope

    @property
    def seconds(self) -> int:
        """Return ``retry_after`` in whole seconds, rounded up (a ``Retry-After`` value)."""
        return max(1, math.ceil(self.retry_after))

    @property
    def reason(self) -> str:
        """Return why an attempt is refused, for the door's answer (after its own text)."""
        whom = "this access key from this address" if self.scope == "key" else "this address"
        return f"too many failed sign-ins for {whom}; retry after {self.seconds} seconds"


class _Count:
    __slots__ = ("blocked_until", "failures", "first")

    def __init__(self, now: float) -> None:
        self.failures = 0
        self.first = now
        self.blocked_until = 0.0


class _Bounded(OrderedDict[Hashable, _Count]):
    """Counts by key, least recently touched first, at most ``size`` of them."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def touch(self, key: Hashable, now: float, window: float) -> _Count:
        count = self.get(key)
        if count is None or (now - count.first > window and now >= count.blocked_until):
            count = _Count(now)
            self[key] = count
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)
        return count


class SignInThrottle:
    """Counts failed sign-ins and says which attempts to refuse; safe across threads.

    Args:
        rules: The thresholds and delays.
        clock: Returns the current time in seconds (monotonic).
    """

    def __init__(
        self, rules: ThrottleRules | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rules = rules or ThrottleRules()
        self._clock = clock
        self._lock = threading.Lock()
        self._pairs = _Bounded(self.rules.max_entries)
        self._addresses = _Bounded(self.rules.max_entries)
        self._trusted: OrderedDict[tuple[str, str], float] = OrderedDict()

    def check(self, access_key_id: str, client: str) -> Refusal | None:
        """Return the refusal an attempt of ``access_key_id`` from ``client`` meets, if any."""
        now = self._clock()
        with self._lock:
            pair = self._pairs.get((access_key_id, client))
            if pair is not None and pair.blocked_until > now:
                return Refusal(pair.blocked_until - now, "key")
            address = self._addresses.get(client)
            if address is not None and address.blocked_until > now:
                trusted = self._trusted.get((access_key_id, client))
                if trusted is None or now - trusted > self.rules.trusted_for:
                    return Refusal(address.blocked_until - now, "address")
        return None

    def failed(self, access_key_id: str, client: str, door: str) -> Refusal | None:
        """Count a failed sign-in; return the refusal it starts, if it starts one.

        Logs a warning naming the access key ID, the client address and the door (never the
        secret) each time a refusal starts.
        """
        rules = self.rules
        now = self._clock()
        started: list[tuple[Scope, _Count]] = []
        counted: tuple[tuple[Scope, _Bounded, Hashable, int], ...] = (
            ("key", self._pairs, (access_key_id, client), rules.threshold),
            ("address", self._addresses, client, rules.address_threshold),
        )
        with self._lock:
            for scope, table, key, threshold in counted:
                count = table.touch(key, now, rules.window)
                count.failures += 1
                if count.failures >= threshold:
                    doublings = min(count.failures - threshold, 32)
                    delay = min(rules.max_delay, rules.base_delay * 2.0**doublings)
                    count.blocked_until = now + delay
                    started.append((scope, count))
        for scope, count in started:
            log.warning(
                "sign-in attempts refused for a while",
                access_key_id=access_key_id,
                client=client,
                door=door,
                scope=scope,
                failures=count.failures,
                retry_after=round(count.blocked_until - now, 3),
            )
        if not started:
            return None
        scope, count = max(started, key=lambda s: s[1].blocked_until)
        return Refusal(count.blocked_until - now, scope)

    def succeeded(self, access_key_id: str, client: str) -> None:
        """Clear the pair's failures, and trust the key from this address (see ``trusted_for``)."""
        now = self._clock()
        key = (access_key_id, client)
        with self._lock:
            self._pairs.pop(key, None)
            self._trusted[key] = now
            self._trusted.move_to_end(key)
            while len(self._trusted) > self.rules.max_entries:
                self._trusted.popitem(last=False)


E = TypeVar("E", bound=Exception)


@dataclass(frozen=True)
class Door(Generic[E]):
    """How one front door answers what the throttle decides.

    Attributes:
        name: The door, in the warning a refusal logs (``api``, ``login``, ``gateway``).
        failure: The error of a failed sign-in at this door.
        refused: The error refusing an attempt before its secret is checked.
        delayed: The error answering a failure that starts a refusal (the failure's own answer
            with the wait); it may be the failure itself, changed.
        guessed: Whether a failure is a wrong guess of a key or its secret (a malformed or
            expired request guesses nothing and is not counted).
    """

    name: str
    failure: type[E]
    refused: Callable[[Refusal], Exception]
    delayed: Callable[[E, Refusal], Exception]
    guessed: Callable[[E], bool] = lambda _: True


class SignInAttempt:
    """One sign-in under way (:func:`sign_in_attempt`)."""

    def __init__(self, throttle: SignInThrottle | None, access_key_id: str, client: str) -> None:
        self._throttle = throttle
        self._pair = (access_key_id, client)

    def succeeded(self) -> None:
        """Report that the secret was right (clears the pair's failures)."""
        if self._throttle is not None:
            self._throttle.succeeded(*self._pair)


@contextmanager
def sign_in_attempt(
    throttle: SignInThrottle | None, access_key_id: str, client: str, door: Door[E]
) -> Iterator[SignInAttempt]:
    """Check a sign-in of ``access_key_id`` from ``client`` against ``throttle`` around its work.

    Before the block runs, an attempt the throttle holds back raises ``door.refused``. A
    ``door.failure`` the block raises is counted (when ``door.guessed``), and answered as
    ``door.delayed`` when it starts a refusal. The block reports a success itself, with
    :meth:`SignInAttempt.succeeded`: not every block that ends without an error verified a secret.
    With no throttle (``None``), nothing is checked or counted.
    """
    attempt = SignInAttempt(throttle, access_key_id, client)
    if throttle is None:
        yield attempt
        return
    refusal = throttle.check(access_key_id, client)
    if refusal is not None:
        raise door.refused(refusal)
    try:
        yield attempt
    except door.failure as exc:
        if not door.guessed(exc):
            raise
        refusal = throttle.failed(access_key_id, client, door.name)
        if refusal is None:
            raise
        answer = door.delayed(exc, refusal)
        if answer is exc:
            raise
        raise answer from exc

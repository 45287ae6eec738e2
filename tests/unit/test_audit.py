"""The audit trail over a MemoryKV: order, paging, filters, retention, the guard against secrets."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from mirror.audit import (
    EVENTS_PREFIX,
    FAILURE,
    SUCCESS,
    Actor,
    AuditEvent,
    AuditQuery,
    AuditRecorder,
    AuditTrail,
    InvalidAuditQueryError,
    kinds,
    new_event_id,
    parse_time,
    safe_value,
)
from mirror.audit.model import MAX_VALUE_BYTES, format_time
from mirror.errors import NotFoundError
from mirror.kv import MemoryKV
from mirror.logging import REDACTED

ADMIN = Actor("admin", "AKIAADMIN", "10.0.0.1", "lakectl/1.0")
BOB = Actor("bob", "AKIABOB", "10.0.0.2", None)
T0 = 1_735_689_600.0  # 2025-01-01T00:00:00Z


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def trail(clock: Clock) -> AuditTrail:
    return AuditTrail(MemoryKV(), retention=10 * 86_400, clock=clock)


def _ids(trail: AuditTrail, query: AuditQuery | None = None, amount: int = 100) -> list[str]:
    return [e.kind for e in trail.page(query or AuditQuery(), amount=amount).events]


def _fill(trail: AuditTrail, clock: Clock, n: int, step: float = 1.0) -> list[AuditEvent]:
    events = []
    for i in range(n):
        events.append(trail.record(f"test.event.{i}", ADMIN, target={"repository": f"r{i % 3}"}))
        clock.now += step
    return events


def test_ids_order_newest_first_and_encode_the_time() -> None:
    older, newer = new_event_id(1_000_000), new_event_id(2_000_000)
    assert newer < older and len(older) == 24
    assert new_event_id(5)[:16] == new_event_id(5)[:16] and new_event_id(5) != new_event_id(5)


def test_a_recorded_event_is_stored_and_read_back_whole(trail: AuditTrail) -> None:
    event = trail.record(
        kinds.AUTH_USER_CREATE,
        ADMIN,
        target={"user": "bob", "ignored": None},  # type: ignore[dict-item]
        status=201,
        after={"email": "bob@example.com"},
        details={"n": 1},
    )
    assert event.result == SUCCESS and event.message is None
    assert event.target == {"user": "bob"}
    [stored] = trail.page(AuditQuery()).events
    assert stored == event
    body = stored.to_json()
    assert body["time"] == "2025-01-01T00:00:00.000000Z"
    assert body["actor"] == {
        "user_id": "admin",
        "access_key_id": "AKIAADMIN",
        "address": "10.0.0.1",
        "user_agent": "lakectl/1.0",
        "via": "api",
    }
    raw = trail.store.kv.get(EVENTS_PREFIX + event.id.encode())
    assert json.loads(raw)["v"] == 1


def test_a_failure_keeps_its_status_and_message(trail: AuditTrail) -> None:
    event = trail.record(kinds.MIRROR_PROMOTE, ADMIN, status=409, message="x" * 5000)
    assert event.result == FAILURE and event.status == 409
    assert event.message == "x" * 1000


def test_pages_follow_next_offset_newest_first(trail: AuditTrail, clock: Clock) -> None:
    _fill(trail, clock, 7)
    seen: list[str] = []
    after = ""
    while True:
        page = trail.page(AuditQuery(), after=after, amount=3)
        seen += [e.kind for e in page.events]
        if not page.has_more:
            assert page.next_offset == ""
            break
        assert page.next_offset == page.events[-1].id
        after = page.next_offset
    assert seen == [f"test.event.{i}" for i in reversed(range(7))]


def test_filters(trail: AuditTrail, clock: Clock) -> None:
    trail.record(kinds.AUTH_USER_CREATE, ADMIN, target={"user": "x"})
    clock.now += 1
    trail.record(kinds.AUTH_USER_DELETE, BOB, target={"user": "x"}, status=404, message="nope")
    clock.now += 1
    trail.record(kinds.REPOSITORY_CREATE, BOB, target={"repository": "repo1"})
    clock.now += 1
    assert _ids(trail, AuditQuery(kind="auth")) == [kinds.AUTH_USER_DELETE, kinds.AUTH_USER_CREATE]
    assert _ids(trail, AuditQuery(kind="auth.user.create")) == [kinds.AUTH_USER_CREATE]
    assert _ids(trail, AuditQuery(kind="auth.use")) == []
    assert _ids(trail, AuditQuery(user="bob")) == [kinds.REPOSITORY_CREATE, kinds.AUTH_USER_DELETE]
    assert _ids(trail, AuditQuery(repository="repo1")) == [kinds.REPOSITORY_CREATE]
    assert _ids(trail, AuditQuery(result=FAILURE)) == [kinds.AUTH_USER_DELETE]
    second = round((T0 + 1) * 1_000_000)
    assert _ids(trail, AuditQuery(since_us=second)) == [
        kinds.REPOSITORY_CREATE,
        kinds.AUTH_USER_DELETE,
    ]
    assert _ids(trail, AuditQuery(until_us=second)) == [
        kinds.AUTH_USER_DELETE,
        kinds.AUTH_USER_CREATE,
    ]
    assert _ids(trail, AuditQuery(since_us=second, until_us=second)) == [kinds.AUTH_USER_DELETE]


def test_a_page_of_rare_matches_ends_at_the_scan_limit(trail: AuditTrail, clock: Clock) -> None:
    _fill(trail, clock, 10)
    page = trail.page(AuditQuery(kind="nothing"), amount=5, scan_limit=4)
    assert page.events == [] and page.has_more
    rest = trail.page(AuditQuery(kind="test.event.0"), after=page.next_offset, scan_limit=100)
    assert [e.kind for e in rest.events] == ["test.event.0"] and not rest.has_more


def test_expired_events_are_not_listed_and_go_as_new_ones_come(clock: Clock) -> None:
    kv = MemoryKV()
    trail = AuditTrail(kv, retention=100, clock=clock, sweep_batch=2)
    _fill(trail, clock, 5, step=10)  # at T0, T0+10, ..., T0+40
    clock.now = T0 + 125  # the first three are older than 100 s
    assert _ids(trail) == ["test.event.4", "test.event.3"]
    assert len(list(kv.scan(EVENTS_PREFIX))) == 5
    trail.record("test.new", ADMIN)  # removes two of the three expired
    assert len(list(kv.scan(EVENTS_PREFIX))) == 4
    assert trail.expire() == 1
    assert trail.expire() == 0
    assert _ids(trail) == ["test.new", "test.event.4", "test.event.3"]


class BrokenKV(MemoryKV):
    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        raise OSError("disk full")


def test_a_kv_failure_never_fails_the_change(clock: Clock) -> None:
    trail = AuditTrail(BrokenKV(), clock=clock)
    event = trail.record(kinds.REPOSITORY_DELETE, ADMIN, target={"repository": "r"})
    assert event.kind == kinds.REPOSITORY_DELETE
    assert trail.page(AuditQuery()).events == []


def test_secrets_are_masked_and_big_values_summarized() -> None:
    value = {
        "secret_access_key": "s3cr3t",
        "nested": [{"password": "pw", "token": None, "name": "n"}],
        "Authorization": "Basic x",
    }
    assert safe_value(value) == {
        "secret_access_key": REDACTED,
        "nested": [{"password": REDACTED, "token": None, "name": "n"}],
        "Authorization": REDACTED,
    }
    big = safe_value({"patterns": ["p" * 100] * 200})
    assert big["truncated"] is True and big["bytes"] > MAX_VALUE_BYTES
    assert len(big["sha256"]) == 64
    assert safe_value(("a", 1, None, object)) == ["a", 1, None, str(object)]


def test_parse_time_takes_unix_seconds_and_rfc_3339() -> None:
    assert parse_time("1735689600", "since") == 1_735_689_600_000_000
    assert parse_time("1735689600.25", "since") == 1_735_689_600_250_000
    assert parse_time("2025-01-01T00:00:00Z", "since") == 1_735_689_600_000_000
    assert parse_time("2025-01-01T01:00:00+01:00", "since") == 1_735_689_600_000_000
    assert parse_time("2025-01-01T00:00:00", "since") == 1_735_689_600_000_000
    assert format_time(1_735_689_600_250_000) == "2025-01-01T00:00:00.250000Z"
    for bad in ("yesterday", "", "1e99", "2025-13-01T00:00:00Z", "nan"):
        with pytest.raises(InvalidAuditQueryError, match="Unix seconds"):
            parse_time(bad, "since")


def test_query_parse_refuses_bad_filters() -> None:
    with pytest.raises(InvalidAuditQueryError, match="use success or failure"):
        AuditQuery.parse(result="ok")
    with pytest.raises(InvalidAuditQueryError, match="is after until"):
        AuditQuery.parse(since="2025-01-02T00:00:00Z", until="2025-01-01T00:00:00Z")
    query = AuditQuery.parse(kind=" auth ", since="1", until="2")
    assert query == AuditQuery("auth", "", "", 1_000_000, 2_000_000, "")


def _describe(exc: BaseException) -> tuple[int, str]:
    return (404, str(exc)) if isinstance(exc, NotFoundError) else (500, "internal server error")


@pytest.fixture
def recorder(trail: AuditTrail) -> Iterator[AuditRecorder]:
    yield AuditRecorder(trail, ADMIN, _describe)


def test_a_change_block_records_success_failure_and_refusal(
    recorder: AuditRecorder, trail: AuditTrail
) -> None:
    with recorder.change(kinds.GC_RULES_SET, target={"repository": "r"}, status=204) as change:
        change.before, change.after = None, {"default_retention_days": 7}
    with (
        pytest.raises(NotFoundError),
        recorder.change(kinds.GC_RULES_DELETE, target={"repository": "gone"}, status=204),
    ):
        raise NotFoundError("not found: repository 'gone'")
    with recorder.change(kinds.BRANCH_PROTECTION_DELETE, target={"repository": "r"}) as change:
        change.refuse(404, "rule not found")
    newest, middle, oldest = trail.page(AuditQuery()).events
    assert (oldest.result, oldest.status, oldest.after) == (
        SUCCESS,
        204,
        {"default_retention_days": 7},
    )
    assert (middle.result, middle.status, middle.message) == (
        FAILURE,
        404,
        "not found: repository 'gone'",
    )
    assert (newest.result, newest.status, newest.message) == (FAILURE, 404, "rule not found")
    assert {e.actor for e in (newest, middle, oldest)} == {ADMIN}


def test_every_kind_nests_under_its_area() -> None:
    assert len(set(kinds.KINDS)) == len(kinds.KINDS)
    for kind in kinds.KINDS:
        area = kind.split(".")[0]
        assert kinds.kind_matches(kind, area) and kinds.kind_matches(kind, kind)
        assert area in {"auth", "repository", "branch", "branch_protection", "gc", "mirror"}

"""The state rules of `mcp_transport.models`: each written once as a Python rule on a row and once as a
query filter, and the two agree on every kind of row (here and on PostgreSQL)."""
from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from mcp_transport.models import Cutoffs, Session, Stream, Worker

pytestmark = pytest.mark.django_db

SETTINGS = {"SESSION_IDLE_TIMEOUT": 600, "EVENT_RETENTION_SECONDS": 300, "LEASE_SECONDS": 30}


@pytest.fixture
def cutoffs():
    with override_settings(MCP_TRANSPORT=SETTINGS):
        yield Cutoffs.at()


def ago(cutoffs, seconds):
    return cutoffs.now - timedelta(seconds=seconds)


def sessions(cutoffs) -> list[Session]:
    """Active, expired (idle), terminated, and each just either side of the idle cutoff."""
    rows = {
        "active": dict(last_seen_at=ago(cutoffs, 5)),
        "at-the-cutoff": dict(last_seen_at=cutoffs.idle),
        "just-expired": dict(last_seen_at=cutoffs.idle - timedelta(microseconds=1)),
        "expired": dict(last_seen_at=ago(cutoffs, 9000)),
        "terminated": dict(last_seen_at=ago(cutoffs, 5), terminated_at=ago(cutoffs, 1)),
        "terminated-and-idle": dict(last_seen_at=ago(cutoffs, 9000), terminated_at=ago(cutoffs, 8000)),
    }
    return [Session.objects.create(id=name, protocol_version="2025-11-25", **fields) for name, fields in rows.items()]


def streams(cutoffs, session) -> list[Stream]:
    """Every status; open with and without a connection (on a live or a gone worker); finished within,
    at and past the retention, and with no finish time recorded."""
    finished = [None, ago(cutoffs, 5), cutoffs.retention, cutoffs.retention - timedelta(microseconds=1),
                ago(cutoffs, 9000)]
    rows = [dict(status=Stream.Status.OPEN, connected_worker=worker) for worker in ("", "live", "gone")]
    rows += [dict(status=status, finished_at=at)
             for status, at in itertools.product(
                 [Stream.Status.COMPLETED, Stream.Status.FAILED, Stream.Status.CANCELLED], finished)]
    return [Stream.objects.create(session=session, request_id="1", **fields) for fields in rows]


def test_session_state_rule_and_filters_agree(cutoffs):
    rows = sessions(cutoffs)
    for session in rows:
        matching = [s for s in Session.State if Session.objects.in_state(s, cutoffs=cutoffs).filter(pk=session.pk)]
        assert matching == [session.state_at(cutoffs)], session.pk
    assert {s.pk: s.state_at(cutoffs) for s in rows} == {
        "active": "active", "at-the-cutoff": "active", "just-expired": "expired", "expired": "expired",
        "terminated": "terminated", "terminated-and-idle": "terminated",
    }
    assert set(Session.objects.active(cutoffs).values_list("pk", flat=True)) == {"active", "at-the-cutoff"}
    assert set(Session.objects.expired(cutoffs).values_list("pk", flat=True)) == {"just-expired", "expired"}


@pytest.mark.parametrize("alive_workers", [None, ["live"]], ids=["as-the-rows-say", "live-workers-only"])
def test_stream_state_rule_and_filters_agree(cutoffs, alive_workers):
    rows = [stream for session in sessions(cutoffs) for stream in streams(cutoffs, session)]
    seen = set()
    for stream in Stream.objects.filter(pk__in=[s.pk for s in rows]).select_related("session"):
        state = stream.state_at(cutoffs, alive_workers)
        matching = [s for s in Stream.State
                    if Stream.objects.in_state(s, cutoffs=cutoffs, alive_workers=alive_workers).filter(pk=stream.pk)]
        assert matching == [state], (stream.session_id, stream.status, stream.connected_worker, stream.finished_at)
        seen.add(state)
    assert seen == set(Stream.State)  # every state was met
    # Replayable: finished within the retention, in an active session; nothing else.
    replayable = Stream.objects.replayable(cutoffs).select_related("session")
    assert replayable.exists()
    for stream in Stream.objects.select_related("session"):
        assert (stream in replayable) == (
            stream.state_at(cutoffs) in (Stream.State.COMPLETED, Stream.State.FAILED, Stream.State.CANCELLED)
            and stream.session.state_at(cutoffs) == Session.State.ACTIVE), stream.pk


def test_a_stream_of_an_idle_session_is_expired_whatever_its_status(cutoffs):
    idle = Session.objects.create(id="idle", protocol_version="2025-11-25", last_seen_at=ago(cutoffs, 9000))
    waiting = Stream.objects.create(session=idle, request_id="1")
    done = Stream.objects.create(session=idle, request_id="2", status=Stream.Status.COMPLETED,
                                 finished_at=ago(cutoffs, 5))
    for stream in (waiting, done):
        assert Stream.objects.get(pk=stream.pk).state_at(cutoffs) == Stream.State.EXPIRED
    assert not Stream.objects.replayable(cutoffs).filter(session=idle).exists()


def test_streams_of_a_deleted_session_keep_how_they_ended(cutoffs):
    """Clients DELETE their session at exit: its streams still say whether they completed, failed or were
    cancelled until their retention ends (not replayable: the session is gone); an open one is expired."""
    deleted = Session.objects.create(id="deleted", protocol_version="2025-11-25", last_seen_at=ago(cutoffs, 5),
                                     terminated_at=ago(cutoffs, 1))
    ended = {status: Stream.objects.create(session=deleted, request_id="1", status=status,
                                           finished_at=ago(cutoffs, 2))
             for status in (Stream.Status.COMPLETED, Stream.Status.FAILED, Stream.Status.CANCELLED)}
    old = Stream.objects.create(session=deleted, request_id="2", status=Stream.Status.COMPLETED,
                                finished_at=ago(cutoffs, 9000))
    waiting = Stream.objects.create(session=deleted, kind=Stream.Kind.STANDALONE)
    for status, stream in ended.items():
        assert Stream.objects.get(pk=stream.pk).state_at(cutoffs) == status
        assert Stream.objects.in_state(status, cutoffs=cutoffs).filter(pk=stream.pk).exists()
    for stream in (old, waiting):
        assert Stream.objects.get(pk=stream.pk).state_at(cutoffs) == Stream.State.EXPIRED
    assert not Stream.objects.replayable(cutoffs).filter(session=deleted).exists()


def test_running_workers_are_the_liveness_rule(cutoffs):
    """`Cutoffs.running_workers`, the connections that count (admin, mcp_status, metrics): not stale."""
    Worker.objects.create(id="alive", host="h", pid=1, heartbeat_at=ago(cutoffs, 1))
    Worker.objects.create(id="stopping", host="h", pid=2, heartbeat_at=ago(cutoffs, 1), stopping=True)
    Worker.objects.create(id="stopped", host="h", pid=3, heartbeat_at=ago(cutoffs, 31), stopping=True)
    assert sorted(cutoffs.running_workers) == ["alive", "stopping"]
    session = Session.objects.create(id="s", protocol_version="2025-11-25", last_seen_at=ago(cutoffs, 5))
    held = {worker: Stream.objects.create(session=session, kind=Stream.Kind.STANDALONE, connected_worker=worker)
            for worker in ("alive", "stopping", "stopped", "never-seen")}
    states = {worker: Stream.objects.select_related("session").get(pk=stream.pk)
              .state_at(cutoffs, alive_workers=cutoffs.running_workers) for worker, stream in held.items()}
    assert states == {"alive": "connected now", "stopping": "connected now", "stopped": "resumable",
                      "never-seen": "resumable"}


def test_worker_liveness_rule_and_filters_agree(cutoffs):
    rows = [
        Worker.objects.create(id="alive", host="h", pid=1, heartbeat_at=ago(cutoffs, 1)),
        Worker.objects.create(id="stopping", host="h", pid=2, heartbeat_at=ago(cutoffs, 1), stopping=True),
        Worker.objects.create(id="stale", host="h", pid=3, heartbeat_at=ago(cutoffs, 31)),
        # Silent past LEASE_SECONDS while stopping: gone, like any silent worker.
        Worker.objects.create(id="stopped", host="h", pid=4, heartbeat_at=ago(cutoffs, 31), stopping=True),
        Worker.objects.create(id="at-the-cutoff", host="h", pid=5, heartbeat_at=cutoffs.heartbeat),
    ]
    for worker in rows:
        matching = [s for s in Worker.Liveness
                    if Worker.objects.in_liveness(s, cutoffs=cutoffs).filter(pk=worker.pk)]
        assert matching == [worker.liveness_at(cutoffs)], worker.pk
    assert {w.pk: w.liveness_at(cutoffs) for w in rows} == {
        "alive": "alive", "stopping": "stopping", "stale": "stale", "stopped": "stale", "at-the-cutoff": "alive",
    }
    assert set(Worker.objects.running(cutoffs).values_list("pk", flat=True)) == {"alive", "stopping", "at-the-cutoff"}


def test_orphaned_requests(cutoffs):
    session = Session.objects.create(id="s", protocol_version="2025-11-25")
    lapsed = Stream.objects.create(session=session, request_id="1", lease_expires_at=ago(cutoffs, 1))
    renewed = Stream.objects.create(session=session, request_id="2",
                                    lease_expires_at=cutoffs.now + timedelta(seconds=9))
    ended = Stream.objects.create(session=session, request_id="3", lease_expires_at=ago(cutoffs, 1),
                                  status=Stream.Status.FAILED)
    get = Stream.objects.create(session=session, kind=Stream.Kind.STANDALONE)
    assert [s.orphaned_at(cutoffs) for s in (lapsed, renewed, ended, get)] == [True, False, False, False]
    assert list(Stream.objects.orphaned(cutoffs).values_list("pk", flat=True)) == [lapsed.pk]

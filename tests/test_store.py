"""The event store: ids, ordering under concurrent writers, replay, pruning."""
import json
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from mcp_transport.eventids import format_event_id, parse_event_id
from mcp_transport.execution.errors import worker_lost
from mcp_transport.models import Event, Session, Stream, StreamConnection, Subscription
from mcp_transport.storage import store
from mcp_transport.storage.executor import Operation
from mcp_transport.storage.sql import PostgresStore, SQLiteStore

pytestmark = pytest.mark.django_db(transaction=True)


ENGINE = settings.DATABASES["default"]["ENGINE"]
POSTGRES, SQLITE = ENGINE.endswith("postgresql"), ENGINE.endswith("sqlite3")


def reconnect():
    """Close this thread's and the database thread's connections: each chooses its store again."""
    from django.db import connections

    from mcp_transport.storage.executor import executor

    connections["default"].close()
    executor.close()


def on_database_thread(fn):
    """Run `fn` on the store's database thread now (a sync test's look at that thread's connection)."""
    from mcp_transport.storage.executor import executor

    return executor._thread.submit(fn).result()


@pytest.fixture(params=[*(["SQL"] if POSTGRES or SQLITE else []), "ORM", *(["prepared"] if POSTGRES else [])])
def write_path(request, monkeypatch):
    """The hot operations run SQL on SQLite and PostgreSQL (prepared there where the project
    allows it) and the ORM where the database has no INSERT ... RETURNING (SQLite before 3.35,
    MySQL) or is another: test every path. Each connection chooses its store when it connects:
    what the database can do is changed (on this thread's connection and the database thread's),
    then both reconnect."""
    from django.db import connections

    if request.param == "ORM" and SQLITE:
        # As SQLite before 3.35 (Django 6 needs 3.37, and says so in two features, not one derived).
        for db in (connections["default"], on_database_thread(lambda: connections["default"])):
            for feature in ("can_return_columns_from_insert", "can_return_rows_from_bulk_insert"):
                if not isinstance(getattr(type(db.features), feature), property):
                    monkeypatch.setattr(db.features, feature, False)
    elif request.param == "ORM":
        # PostgreSQL always has RETURNING (Django's own inserts need it there): the ORM path as
        # MariaDB/MySQL and Oracle take it (on those, the store they have anyway).
        monkeypatch.setattr(store, "implementation", lambda db: store.Store)
    if request.param == "prepared":
        # As a project allows it: the option applies to the connections made from now on (0: psycopg
        # prepares a statement the first time it runs, where 5 would wait for its fifth run).
        monkeypatch.setitem(connections["default"].settings_dict.setdefault("OPTIONS", {}), "prepare_threshold", 0)
    reconnect()
    expected = {"ORM": store.Store, "prepared": PostgresStore, "SQL": PostgresStore if POSTGRES else SQLiteStore}[
        request.param]
    assert type(store.current()) is expected
    assert type(on_database_thread(store.current)) is expected
    yield request.param
    monkeypatch.undo()
    reconnect()


def new_session(sid="s1", version="2025-11-25"):
    return store.create_session(sid, "default", version, {"name": "c", "version": "1"}, {})


def test_event_ids_round_trip_and_reject_garbage():
    assert parse_event_id(format_event_id(12, 5)) == (12, 5)
    for garbage in ["", "12", "-5", "12-", "a-1", "1-b", "1-2-3", "1 -2", "1-2\n", "9" * 50 + "-1", "' OR 1=1 --"]:
        assert parse_event_id(garbage) is None


def test_append_numbers_events_and_finishes_the_stream(write_path):
    new_session()
    stream_id, priming = store.open_stream("s1", method="tools/call", request_id="1", prime=True)
    assert priming.seq == 0 and priming.payload == ""
    first = store.append(stream_id, ["a", "b"])
    final = store.append(stream_id, ["done"], finish=Stream.Status.COMPLETED)
    assert [e.seq for e in first + final] == [1, 2, 3]
    assert final[0].kind == Event.Kind.FINAL
    assert store.append(stream_id, ["late"]) == []
    events, status = store.events_after(stream_id, 1)
    assert [e.payload for e in events] == ["b", "done"] and status == Stream.Status.COMPLETED


def test_concurrent_writers_get_unique_contiguous_ordered_seqs():
    new_session()
    stream_id, _ = store.open_stream("s1", prime=True)
    errors = []

    def writer(n):
        from django.db import connection

        try:
            for i in range(20):
                store.append(stream_id, [f"{n}:{i}"])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    events, _ = store.events_after(stream_id, 0)
    assert [e.seq for e in events] == list(range(1, 121))
    for n in range(6):
        mine = [int(e.payload.split(":")[1]) for e in events if e.payload.startswith(f"{n}:")]
        assert mine == list(range(20))


def test_replay_never_crosses_streams_or_sessions():
    new_session("s1")
    new_session("s2")
    a, _ = store.open_stream("s1", prime=True)
    b, _ = store.open_stream("s2", prime=True)
    store.append(a, ["a1"])
    store.append(b, ["b1"])
    assert store.find_stream("s1", b) is None
    assert [e.payload for e in store.events_after(a, 0)[0]] == ["a1"]


def test_finished_streams_stay_replayable_for_the_retention_only():
    new_session()
    stream_id, _ = store.open_stream("s1", prime=True)
    store.append(stream_id, ["r"], finish=Stream.Status.COMPLETED)
    assert store.find_stream("s1", stream_id) is not None
    Stream.objects.filter(pk=stream_id).update(finished_at=timezone.now() - timedelta(hours=2))
    with override_settings(MCP_TRANSPORT={"EVENT_RETENTION_SECONDS": 3600}):
        assert store.find_stream("s1", stream_id) is None


def test_stream_progress_reads_every_asked_stream_and_only_those(write_path):
    """The wake-up sweep's question, asked about hundreds of held streams at once."""
    new_session()
    opened = [store.open_stream("s1", method="tools/call", request_id=str(i), prime=True)[0] for i in range(300)]
    store.append(opened[0], ["a", "b"])
    store.append(opened[1], ["done"], finish=Stream.Status.COMPLETED)
    asked = opened[:250] + [10**12]
    progress = store.stream_progress(asked)
    assert set(progress) == set(opened[:250])
    assert progress[opened[0]] == (2, Stream.Status.OPEN)
    assert progress[opened[1]] == (1, Stream.Status.COMPLETED)
    assert all(progress[i] == (0, Stream.Status.OPEN) for i in opened[2:250])
    assert store.stream_progress([]) == {}


def test_standalone_stream_is_one_per_session(write_path):
    new_session()
    new_session("s2")
    first = store.standalone_stream("s1")
    second = store.standalone_stream("s1")
    assert first == (first[0], 0, True) and second == (first[0], 0, False)
    assert store.standalone_stream("s2")[0] != first[0]
    stream = Stream.objects.get(pk=first[0])
    assert (stream.session_id, stream.kind, stream.status, stream.worker, stream.connected_worker) == (
        "s1", "standalone", "open", store.WORKER, "")
    assert store.events_after(first[0], -1) == ([store.StoredEvent(first[0], 0, "priming", "")], "open")
    log_id = store.connected(first[0], None, "never", 1000)
    stream.refresh_from_db()
    assert (stream.connected_worker, stream.disconnect_policy, stream.retry_ms, stream.reconnects) == (
        store.WORKER, "never", 1000, 0)
    log = StreamConnection.objects.get(pk=log_id)
    assert (log.stream_id, log.worker, log.resumed_from, log.closed_at, log.close_reason) == (
        first[0], store.WORKER, None, None, "")


def test_a_resumption_finds_and_replays_then_records(write_path):
    """One trip: this session's stream only and the events after the given seq; the connection
    is recorded by a second call, which the endpoint does not wait for."""
    new_session()
    new_session("other")
    stream_id, _ = store.open_stream("s1", method="tools/call", tool_name="echo", prime=True)
    store.append(stream_id, ["a", "b"])

    stream, failed, events, status = store.resume_stream("s1", stream_id, 1, worker_lost)
    assert failed == [] and status == "open"
    assert (stream.id, stream.kind, stream.method, stream.tool_name, stream.reconnects) == (
        stream_id, "request", "tools/call", "echo", 0)
    assert [(e.seq, e.kind, e.payload) for e in events] == [(2, "message", "b")]
    log_id = store.connected(stream_id, 1, "after_priming", 250)
    stream = Stream.objects.get(pk=stream_id)
    assert (stream.reconnects, stream.connected_worker, stream.disconnect_policy, stream.retry_ms) == (
        1, store.WORKER, "after_priming", 250)
    assert StreamConnection.objects.get(pk=log_id).resumed_from == 1

    store.append(stream_id, ["c"], finish=Stream.Status.COMPLETED)
    _, _, events, status = store.resume_stream("s1", stream_id, 2, worker_lost)
    assert [(e.seq, e.kind) for e in events] == [(3, "final")] and status == "completed"
    assert store.resume_stream("s1", stream_id, 3, worker_lost)[2] == []
    assert store.resume_stream("s1", stream_id, 4, worker_lost) is None  # after the last event: not ours
    assert store.resume_stream("other", stream_id, 0, worker_lost) is None
    assert store.resume_stream("s1", stream_id + 100, 0, worker_lost) is None
    for huge in (2**63 - 1, 2**63, 10**40):
        assert store.resume_stream("s1", huge, 0, worker_lost) is None
        assert store.resume_stream("s1", stream_id, huge, worker_lost) is None
    Stream.objects.filter(pk=stream_id).update(finished_at=timezone.now() - timedelta(hours=2))
    with override_settings(MCP_TRANSPORT={"EVENT_RETENTION_SECONDS": 3600}):
        assert store.resume_stream("s1", stream_id, 0, worker_lost) is None
    assert Stream.objects.get(pk=stream_id).reconnects == 1  # finding and replaying record nothing


def test_resuming_a_request_whose_worker_is_gone_fails_it(write_path):
    new_session()
    stream_id, _ = store.open_stream("s1", method="tools/call", request_id="7", prime=True)
    store.append(stream_id, ["p"])
    Stream.objects.filter(pk=stream_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    _, failed, events, status = store.resume_stream("s1", stream_id, 0, worker_lost)
    assert status == "failed" and [e.seq for e in failed] == [2]
    assert [(e.seq, e.kind) for e in events] == [(1, "message"), (2, "final")]
    error = json.loads(events[-1].payload)
    assert error["id"] == 7 and error["error"]["data"]["reason"] == "worker_lost"


def test_subscriptions_are_found_by_their_exact_uri():
    """Any length, and exactly: a collation may fold case and trailing spaces (MariaDB's default)."""
    new_session("s1")
    new_session("s2")
    new_session("old")
    long = "test://" + "é" * 3000  # above any index key
    uris = ["file:///A", "file:///a", "file:///a ", long, "emoji://\U0001F600"]
    for uri in uris:
        store.subscribe("s1", uri)
    store.subscribe("s1", "file:///A")  # again: still one subscription
    store.subscribe("s2", "file:///a")
    store.subscribe("old", "file:///a")
    Session.objects.filter(pk="old").update(last_seen_at=timezone.now() - timedelta(days=2))
    assert sorted(Subscription.objects.filter(session="s1").values_list("uri", flat=True)) == sorted(uris)
    assert Subscription.objects.count() == 7
    assert store.subscribed_sessions("default", "file:///A") == ["s1"]
    assert sorted(store.subscribed_sessions("default", "file:///a")) == ["s1", "s2"]
    assert store.subscribed_sessions("default", "file:///a ") == ["s1"]
    assert store.subscribed_sessions("default", long) == ["s1"]
    assert store.subscribed_sessions("default", long[:-1]) == []
    assert store.subscribed_sessions("default", "emoji://\U0001F600") == ["s1"]
    assert store.subscribed_sessions("other-server", "file:///a") == []
    store.unsubscribe("s1", "file:///a")
    store.unsubscribe("s1", "file:///never")
    assert store.subscribed_sessions("default", "file:///A") == ["s1"]
    assert store.subscribed_sessions("default", "file:///a") == ["s2"]
    store.unsubscribe("s1", long)
    assert store.subscribed_sessions("default", long) == []


def test_a_cancel_finds_the_worker_of_the_exact_request_id():
    """JSON-RPC ids "a" and "A" are different requests, whatever the collation."""
    new_session()
    lower, _ = store.open_stream("s1", request_id='"a"')
    upper, _ = store.open_stream("s1", request_id='"A"')
    Stream.objects.filter(pk=upper).update(worker="elsewhere")
    assert store.request_worker("s1", '"a"') == store.WORKER
    assert store.request_worker("s1", '"A"') == "elsewhere"
    store.finish(lower, Stream.Status.CANCELLED)
    assert store.request_worker("s1", '"a"') is None
    assert store.request_worker("s1", '"A"') == "elsewhere"


def test_sessions_expire_and_terminate():
    new_session("live")
    new_session("old")
    Session.objects.filter(pk="old").update(last_seen_at=timezone.now() - timedelta(days=2))
    assert store.get_session("live", "default") is not None
    assert store.get_session("old", "default") is None
    assert store.get_session("live", "other-server") is None
    assert store.terminate_session("live", "default") is True
    assert store.get_session("live", "default") is None
    assert Session.objects.get(pk="live").state == "terminated"


def test_prune_removes_expired_sessions_and_old_streams():
    new_session("keep")
    new_session("gone")
    done, _ = store.open_stream("keep", prime=True)
    store.append(done, ["x"], finish=Stream.Status.COMPLETED)
    running, _ = store.open_stream("keep", prime=True)
    Session.objects.filter(pk="gone").update(last_seen_at=timezone.now() - timedelta(days=2))
    Stream.objects.filter(pk=done).update(finished_at=timezone.now() - timedelta(hours=2))
    with override_settings(MCP_TRANSPORT={"EVENT_RETENTION_SECONDS": 3600}):
        store.prune()
    assert list(Session.objects.values_list("pk", flat=True)) == ["keep"]
    assert list(Stream.objects.values_list("pk", flat=True)) == [running]
    assert not Event.objects.filter(stream_id=done).exists()


async def test_queued_notifications_never_merge_into_a_finishing_append():
    """A tool still emitting after its stream was ended (shutdown, failure) must not push the end back."""
    from asgiref.sync import sync_to_async

    from mcp_transport.storage.executor import executor

    await sync_to_async(new_session)()
    stream_id, _ = await store.aopen_stream("s1", prime=True)
    first, new = executor.submit_items(store.append, stream_id, ["n1"])
    final = executor.submit(store.append, stream_id, ["end"], finish=Stream.Status.FAILED)
    late, late_new = executor.submit_items(store.append, stream_id, ["n2"])
    assert new and late_new
    assert [e.kind for e in await first] == ["message"]
    assert [(e.payload, e.kind) for e in await final] == [("end", "final")]
    assert await late == []


def test_the_hot_path_stores_what_the_orm_would(write_path):
    """open_stream and append write with their own statements on SQLite and PostgreSQL: rows must
    read back through the ORM exactly as ORM-written rows do (aware datetimes, choices, sequence numbers)."""
    from django.db import connection

    new_session()
    before = timezone.now()
    stream_id, _ = store.open_stream("s1", method="tools/call", request_id='"r"', tool_name="echo", prime=True,
                                     policy="never", retry_ms=500)
    store.append(stream_id, ["a"])
    store.append(stream_id, ["b"], finish=Stream.Status.COMPLETED)
    after = timezone.now()
    stream = Stream.objects.get(pk=stream_id)
    assert (stream.kind, stream.status, stream.last_seq, stream.reconnects) == ("request", "completed", 2, 0)
    assert (stream.method, stream.tool_name, stream.request_id, stream.retry_ms) == ("tools/call", "echo", '"r"', 500)
    assert stream.worker == stream.connected_worker == store.WORKER and stream.disconnect_policy == "never"
    assert before <= stream.created_at == stream.connected_at <= stream.last_event_at <= stream.finished_at <= after
    assert stream.lease_expires_at > after
    events = list(Event.objects.filter(stream_id=stream_id).order_by("seq").values_list("seq", "kind", "payload"))
    assert events == [(0, "priming", ""), (1, "message", "a"), (2, "final", "b")]
    assert Stream.objects.filter(created_at__gte=before, created_at__lte=after, pk=stream_id).exists()
    if POSTGRES and write_path != "ORM":
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [row[0] for row in cursor.fetchall()]
        # Only where the project allows it (DATABASES OPTIONS prepare_threshold): PgBouncer.
        assert any("json_to_recordset" in sql for sql in prepared) == (write_path == "prepared")
    if connection.vendor == "sqlite" and write_path == "SQL":
        raw = connection.cursor().execute("SELECT CAST(created_at AS TEXT) FROM mcp_transport_stream WHERE id = %s",
                                          [stream_id]).fetchone()[0]
        assert raw == connection.ops.adapt_datetimefield_value(stream.created_at)


async def test_a_pending_streams_writes_queue_behind_its_insert_and_survive_a_batch_rerun():
    """A request's task queues its events before the stream's INSERT has run; if another write in
    the same batch fails, the batch is re-run call by call and the events follow the re-run INSERT."""
    from asgiref.sync import sync_to_async

    from mcp_transport.storage.executor import executor

    def fails():
        raise ValueError("boom")

    await sync_to_async(new_session)()
    pending = store.PendingStream()
    with pytest.raises(RuntimeError):
        store.stream_pk(pending)
    opened = executor.submit(store.open_stream, "s1", prime=True, pending=pending)
    failed = executor.submit(fails)
    progress, _ = executor.submit_items(store.append, pending, ["n1"])
    final = executor.submit(store.append, pending, ["end"], finish=Stream.Status.COMPLETED)
    stream_id, priming = await opened
    with pytest.raises(ValueError):
        await failed
    assert pending.id == stream_id and priming.seq == 0
    assert [(e.stream_id, e.seq) for e in await progress + await final] == [(stream_id, 1), (stream_id, 2)]
    events, status = await store.aevents_after(stream_id, -1)
    assert [e.payload for e in events] == ["", "n1", "end"] and status == "completed"
    assert await sync_to_async(Stream.objects.count)() == 1


async def test_a_run_of_stream_opens_is_one_call_and_each_gets_its_own_stream(write_path, monkeypatch):
    """The database thread hands adjacent open_request_stream calls to its `many` twin (on
    PostgreSQL: one statement); each caller gets its own row."""
    from asgiref.sync import sync_to_async

    from mcp_transport.storage.executor import executor

    runs = []

    many = store.open_request_stream.many

    def counted(calls):
        runs.append(len(calls))
        return many(calls)

    monkeypatch.setattr(store.open_request_stream, "many", counted)
    await sync_to_async(new_session)()
    # 2, 2, 1 and 0 events; text that quoting or a JSON round trip could get wrong
    shapes = [(True, ['{"q": "\\"r0\\" \\\\ \\u00e9"}']), (True, ["r1 \"'\\ \n\t é 🎉 \x7f"]), (False, ["r2"]), (False, [])]
    pendings = [store.PendingStream() for _ in shapes]
    futures = [
        executor.submit(store.open_request_stream, "s1", method="tools/call", request_id=f'"{i}\\', prime=prime,
                        pending=pendings[i], writes=[(payloads, Stream.Status.COMPLETED)] if payloads else ())
        for i, (prime, payloads) in enumerate(shapes)
    ]
    results = [await future for future in futures]
    assert runs == [4]
    assert len({stream_id for stream_id, _, _ in results}) == 4
    for i, ((prime, payloads), (stream_id, priming, stored)) in enumerate(zip(shapes, results)):
        assert pendings[i].id == stream_id
        assert priming == (store.StoredEvent(stream_id, 0, "priming", "") if prime else None)
        assert stored == ([[store.StoredEvent(stream_id, 1, "final", payloads[0])]] if payloads else [])
        stream = await sync_to_async(Stream.objects.get)(pk=stream_id)
        assert (stream.request_id, stream.status, stream.last_seq) == (
            f'"{i}\\', "completed" if payloads else "open", len(payloads))
        events, _ = await store.aevents_after(stream_id, -1)
        assert [(e.seq, e.payload) for e in events] == [(0, "")] * prime + [(1, p) for p in payloads]


async def test_a_run_of_stream_opens_without_events(write_path):
    """Clients older than SSE polling get no priming event: a run of opens may store no event at all."""
    from asgiref.sync import sync_to_async

    from mcp_transport.storage.executor import executor

    await sync_to_async(new_session)()
    futures = [executor.submit(store.open_request_stream, "s1", method="tools/call", request_id=str(i))
               for i in range(3)]
    results = [await future for future in futures]
    assert [(priming, stored) for _, priming, stored in results] == [(None, [])] * 3
    ids = [stream_id for stream_id, _, _ in results]
    rows = await sync_to_async(list)(Stream.objects.filter(pk__in=ids).order_by("pk").values_list("request_id", "status"))
    assert rows == [("0", "open"), ("1", "open"), ("2", "open")]
    assert await sync_to_async(Event.objects.filter(stream_id__in=ids).count)() == 0


async def test_a_function_with_its_own_transaction_runs_alone_without_one():
    """Resumptions, replays and one-statement task operations open a transaction only where they
    need one (on PostgreSQL: none, two round trips fewer); every other call alone in its batch gets one."""
    from dataclasses import replace

    from django.db import connection

    from mcp_transport.storage.executor import executor

    def in_transaction():
        return connection.in_atomic_block

    assert await executor.run(in_transaction) is True
    assert await executor.run(Operation(in_transaction, own_transaction=True)) is False

    opens = Operation(lambda _: connection.in_atomic_block,
                      many=lambda calls: [connection.in_atomic_block] * len(calls))
    merged = [executor.submit(opens, i) for i in range(3)]  # one run of a `many` operation: one call
    assert [await f for f in merged] == [True] * 3
    own = replace(opens, own_transaction=True)
    merged = [executor.submit(own, i) for i in range(3)]
    assert [await f for f in merged] == [False] * 3
    for fn in (store.resume_stream, store.attach, store.events_after, store.connected, store.open_request_stream):
        assert isinstance(fn, Operation) and fn.own_transaction
    # A task's creation and its polls are one statement each: no BEGIN / COMMIT around them. Its
    # outcome is two writes (the row, its status event): in the batch's transaction.
    assert not isinstance(store.finish_task, Operation)
    for fn in (store.create_task, store.get_task, store.get_task_by_id, store.task_answers):
        assert isinstance(fn, Operation) and fn.own_transaction, fn.__name__
    assert store.open_request_stream.many is not None and store.append.__name__ == "append"


def test_a_task_read_by_the_store_is_what_the_orm_reads(write_path):
    """get_task's own statement (binary results on PostgreSQL, one or many ids) gives every column
    as the ORM does: aware datetimes in the connection's time zone, text, numbers, no TTL as None."""
    from mcp_transport.models import Task

    fields = dict(server="default", principal="ann", method="tools/call", tool="slow_compute",
                  request={"name": "slow_compute"}, client_capabilities={}, poll_interval_ms=1000)
    store.create_task("t-1", ttl_ms=60_000, **fields)
    store.create_task("t-2", ttl_ms=None, **fields)
    Task.objects.filter(pk="t-1").update(status_message="half way: ünïcode", result='{"content": []}')
    alone = store.get_task("t-1", "default", "ann")
    both = store.current().get_tasks([("t-1", "default", "ann"), ("t-2", "default", "ann")])
    for read in (alone, both[0], both[1]):
        row = Task.objects.get(pk=read.id)
        for name in read._fields:
            ours, theirs = getattr(read, name), getattr(row, name)
            assert ours == theirs and type(ours) is type(theirs), (name, ours, theirs)
            assert getattr(ours, "tzinfo", None) == getattr(theirs, "tzinfo", None), name
    assert both[1].expires_at is None and alone.expires_at > alone.created_at


async def test_polls_of_tasks_in_one_batch_are_one_statement_and_each_gets_its_own_answer():
    """A run of get_task calls in one batch (clients polling their tasks) is one SELECT; each poll
    gets its task only if it names that task exactly, on its server, as its principal."""
    from django.db import connection

    from mcp_transport.storage.executor import executor

    fields = dict(method="tools/call", tool="slow_compute", request={}, client_capabilities={}, ttl_ms=60_000,
                  poll_interval_ms=1000)
    await store.acreate_task("task-a", server="default", principal="ann", **fields)
    await store.acreate_task("task-b", server="default", principal="", **fields)
    await store.acreate_task("task-c", server="other", principal="ann", **fields)
    statements = []

    def count():
        connection.execute_wrappers.append(lambda execute, sql, *rest: statements.append(sql) or execute(sql, *rest))

    def stop():
        connection.execute_wrappers.pop()

    await executor.run(count)
    asks = [("task-a", "default", "ann"), ("task-b", "default", ""), ("task-a", "default", "ben"),
            ("task-c", "default", "ann"), ("TASK-A", "default", "ann"), ("nope", "default", ""),
            ("task-a", "default", "ann"), ("task-c", "other", "ann")]
    merged = [executor.submit(store.get_task, *ask) for ask in asks]
    found = [await f for f in merged]
    await executor.run(stop)
    assert len([sql for sql in statements if "mcp_transport_task" in sql]) == 1, statements
    assert [row.pk if row is not None else None for row in found] == [
        "task-a", "task-b", None, None, None, None, "task-a", "task-c"]
    alone = [await store.aget_task(*ask) for ask in asks]
    assert [row.pk if row is not None else None for row in alone] == [
        row.pk if row is not None else None for row in found]


def test_a_burst_above_one_statements_size_is_stored(write_path, monkeypatch):
    """A batch of appends may hold more than MySQL/MariaDB take in one statement (max_allowed_packet,
    16 MB by default), each event small: the ORM path inserts at most INSERT_CHARS per statement."""
    from django.db import connection

    new_session()
    limit = None
    if connection.vendor == "mysql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@max_allowed_packet")
            limit = cursor.fetchone()[0]
    if limit and limit <= 64 * 1024 * 1024:  # above the server's own limit
        burst = [f"{i:03}" + "x" * (limit // 90) for i in range(100)]
    else:
        from mcp_transport.storage import orm

        monkeypatch.setattr(orm, "INSERT_CHARS", 1000)
        burst = [f"{i:03}" + "x" * 300 for i in range(100)]
    stream_id, _, stored = store.open_request_stream("s1", prime=True, writes=[(burst, None)])
    assert [e.seq for e in stored[0]] == list(range(1, 101))
    events = store.append(stream_id, burst, finish=Stream.Status.COMPLETED)
    assert [e.seq for e in events] == list(range(101, 201))
    events, status = store.events_after(stream_id, 0)
    assert [e.payload for e in events] == burst * 2 and status == "completed"


def test_writes_made_before_the_insert_are_stored_with_it(write_path):
    """A quick request's answer is written with its stream: numbered after the priming event,
    the finishing write ends the stream, and nothing after it is stored."""
    new_session()
    stream_id, priming, stored = store.open_request_stream(
        "s1", method="tools/call", request_id="1", prime=True,
        writes=[(["p1", "p2"], None), (["result"], Stream.Status.COMPLETED), (["late"], None)],
    )
    assert priming.seq == 0
    assert [[(e.stream_id, e.seq, e.kind) for e in events] for events in stored] == [
        [(stream_id, 1, "message"), (stream_id, 2, "message")], [(stream_id, 3, "final")], []]
    stream = Stream.objects.get(pk=stream_id)
    assert (stream.status, stream.last_seq) == ("completed", 3) and stream.finished_at == stream.last_event_at
    events, status = store.events_after(stream_id, -1)
    assert [(e.seq, e.payload) for e in events] == [(0, ""), (1, "p1"), (2, "p2"), (3, "result")]

    cancelled, _, stored = store.open_request_stream("s1", writes=[([], Stream.Status.CANCELLED)])
    assert stored == [[]] and Stream.objects.get(pk=cancelled).status == "cancelled"
    assert store.events_after(cancelled, -1) == ([], "cancelled")
    assert store.append(cancelled, ["x"]) == []


def test_the_store_is_chosen_from_what_the_database_can_do():
    """SQL where the database has INSERT ... RETURNING (and, on SQLite, JSON1); the ORM elsewhere."""
    from types import SimpleNamespace

    implementation = store.implementation

    def db(vendor, returning=True, json=True):
        return SimpleNamespace(vendor=vendor, features=SimpleNamespace(can_return_columns_from_insert=returning,
                                                                      supports_json_field=json))

    assert implementation(db("postgresql")) is PostgresStore
    assert implementation(db("sqlite")) is SQLiteStore
    assert implementation(db("sqlite", returning=False)) is store.Store  # SQLite before 3.35
    assert implementation(db("sqlite", json=False)) is store.Store
    assert implementation(db("mysql", returning=False)) is store.Store
    assert implementation(db("mysql")) is store.Store  # MariaDB 10.5+ has RETURNING; not these statements
    assert implementation(db("oracle")) is store.Store


# The statements each hot operation runs on the SQL path (each one round trip on PostgreSQL).
STATEMENTS = {
    "open": 1 if POSTGRES else 2,  # a stream with its priming event and early writes
    "open bare": 1,  # without events
    "append": 1 if POSTGRES else 2,
    "events_after": 2,
    "resume": 1 if POSTGRES else 2,
    "connected": 1 if POSTGRES else 2,
    "progress": 1,
    "standalone": 2 if POSTGRES else 3,  # found missing, then made
    "standalone again": 1,
}


def _hot_operations(session_id="s1"):
    """Every hot operation once, as `name -> callable`, each using what the one before made."""
    made = {}

    def opened():
        made["stream"] = store.open_request_stream(session_id, method="tools/call", request_id="1", prime=True,
                                                   writes=[(["early"], None)])[0]

    return made, {
        "open": opened,
        "open bare": lambda: store.open_request_stream(session_id, request_id="2"),
        "append": lambda: store.append(made["stream"], ["late"]),
        "events_after": lambda: store.events_after(made["stream"], 0),
        "resume": lambda: store.resume_stream(session_id, made["stream"], 1, worker_lost),
        "connected": lambda: store.connected(made["stream"], 1, "never", 100),
        "progress": lambda: store.stream_progress([made["stream"]]),
        "standalone": lambda: store.standalone_stream(session_id),
        "standalone again": lambda: store.standalone_stream(session_id),
    }


def test_djangos_cursor_sees_the_hot_statements(write_path):
    """The hot statements run on Django's cursor: `connection.execute_wrapper` (what APM tools
    use) and CaptureQueriesContext / DEBUG's `connection.queries` (what the debug toolbar reads)
    see every one, and each operation runs no more statements than it needs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    new_session()
    seen = []

    def record(execute, sql, params, many, context):
        if not sql.startswith(("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT")):  # the transaction's own
            seen.append(sql)
        return execute(sql, params, many, context)

    statements = []
    made, operations = _hot_operations()
    for name, run in operations.items():
        del seen[:]
        with connection.execute_wrapper(record):
            run()
        assert seen, name
        if write_path != "ORM":
            assert len(seen) == STATEMENTS[name], (name, seen)
        statements += seen
    assert any("INSERT INTO" in sql and "mcp_transport_stream" in sql for sql in statements)
    assert any("INSERT INTO" in sql and "mcp_transport_event" in sql for sql in statements)

    # The same operations as DEBUG logs them (on SQLite, through Django's own cursor and its `%s`).
    new_session("s2")
    logged = []
    made, operations = _hot_operations("s2")
    for name, run in operations.items():
        with CaptureQueriesContext(connection) as captured:
            run()
        queries = [query["sql"] for query in captured.captured_queries
                   if not query["sql"].startswith(("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT"))]
        if write_path != "ORM":
            assert len(queries) == STATEMENTS[name], (name, queries)
        logged += queries
    assert all(sql and "%s" not in sql for sql in logged)  # with their values, as Django logs a query
    assert any("INSERT INTO" in sql and "mcp_transport_event" in sql and "late" in sql for sql in logged)
    events, status = store.events_after(made["stream"], -1)
    assert [(e.seq, e.payload) for e in events] == [(0, ""), (1, "early"), (2, "late")] and status == "open"


async def test_the_database_threads_statements_are_seen_on_its_connection():
    """The database thread's connection is the one to watch for the store's statements."""
    from asgiref.sync import sync_to_async
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from mcp_transport.storage.executor import database_alias, executor

    await sync_to_async(new_session)()
    stream_id, _ = await store.aopen_stream("s1", prime=True)
    seen = []

    def record(execute, sql, params, many, context):
        seen.append((sql, context["connection"].alias))
        return execute(sql, params, many, context)

    def watch():
        db = connections[database_alias()]
        wrapper, captured = db.execute_wrapper(record), CaptureQueriesContext(db)
        wrapper.__enter__()
        captured.__enter__()
        return wrapper, captured

    wrapper, captured = await executor.run(watch)
    try:
        await store.aappend(stream_id, ["a"])
        events, _ = await store.aevents_after(stream_id, 0)
    finally:
        await executor.run(lambda: (captured.__exit__(None, None, None), wrapper.__exit__(None, None, None)))
    assert [e.payload for e in events] == ["a"]
    logged = [query["sql"] for query in captured.captured_queries]
    for statements in ([sql for sql, _ in seen], logged):
        assert any("UPDATE" in sql and "mcp_transport_stream" in sql for sql in statements)  # the append
        assert any(sql.startswith("SELECT") and "mcp_transport_event" in sql for sql in statements)  # the read
    assert {alias for _, alias in seen} == {"default"}


SECOND = "second" in settings.DATABASES


class StoreWritesToSecond:
    """Sends the writes of the store's tables to the "second" database; reads stay on "default"
    (as a replica's would)."""

    def db_for_write(self, model, **hints):
        return "second" if model._meta.app_label == "mcp_transport" else None


@pytest.mark.skipif(not SECOND, reason="the settings have no second database")
@pytest.mark.django_db(transaction=True, databases=["default", *(["second"] if SECOND else [])])
async def test_the_store_follows_the_database_router():
    """Every operation, its reads included, and the database thread's batches go to the database
    that `router.db_for_write(Stream)` names."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    from mcp_transport.storage.executor import database_alias, executor

    with override_settings(DATABASE_ROUTERS=[f"{__name__}.StoreWritesToSecond"]):
        assert database_alias() == "second"
        assert await sync_to_async(new_session)() is not None
        assert await store.aget_session("s1", "default") is not None
        stream_id, priming = await store.aopen_stream("s1", prime=True)
        opened = executor.submit(store.open_request_stream, "s1", writes=[(["answer"], Stream.Status.COMPLETED)])
        in_batch = executor.submit(lambda: (connections["second"].in_atomic_block,
                                            connections["default"].in_atomic_block))
        await store.aappend(stream_id, ["a"])
        assert await in_batch == (True, False)  # the batch's transaction is on "second"
        answered, _, stored = await opened
        events, status = await store.aevents_after(stream_id, -1)
        assert [e.payload for e in events] == ["", "a"] and status == "open"
        _, failed, replayed, _ = await store.aresume_stream("s1", stream_id, 0, worker_lost)
        assert failed == [] and [e.payload for e in replayed] == ["a"]
        assert (await store.astream_progress([stream_id, answered]))[answered] == (1, "completed")
        assert (await executor.run(store.current)).alias == "second"

    def counts(alias):
        return [model.objects.using(alias).count() for model in (Session, Stream, Event)]

    assert await sync_to_async(counts)("second") == [1, 2, 3]
    assert await sync_to_async(counts)("default") == [0, 0, 0]

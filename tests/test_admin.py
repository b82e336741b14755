"""The operators' admin through Django's test client: pages, filters, search, operations,
permissions, and query counts that do not grow with the rows shown.

Operations are checked down to the control messages they put on the (in-memory) channel
layer; tests/test_admin_e2e.py checks what a real daphne does with them.
"""
from __future__ import annotations

import asyncio
import json
import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from mcp_transport import operations
from mcp_transport.admin import timeline
from mcp_transport.admin.display import pretty_json, summarize
from mcp_transport.models import Event, Session, Stream, StreamConnection, Task, TaskEvent, Worker
from mcp_transport.protocol import jsonrpc, tasks
from mcp_transport.storage import store
from mcp_transport.wakeups import relay

pytestmark = pytest.mark.django_db

SESSIONS = reverse("admin:mcp_transport_session_changelist")
STREAMS = reverse("admin:mcp_transport_stream_changelist")
EVENTS = reverse("admin:mcp_transport_event_changelist")
WORKERS = reverse("admin:mcp_transport_worker_changelist")
TASKS = reverse("admin:mcp_transport_task_changelist")


# Data


_counter = iter(range(1, 10**9))


def make_session(session_id=None, *, client="inspector", version="2025-11-25", idle=0, terminated=None, user=None,
                 **kwargs) -> Session:
    now = timezone.now()
    return Session.objects.create(
        id=session_id or f"{next(_counter):032x}", protocol_version=version, client_name=client,
        client_version="1.2", last_seen_at=now - timedelta(seconds=idle), created_at=now - timedelta(seconds=idle + 5),
        terminated_at=terminated, user=user, client_capabilities={"sampling": {}}, **kwargs,
    )


def progress(i, total):
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": 1, "progress": i, "total": total, "message": f"step {i}"}})


def make_stream(session, *, events=3, primed=True, status=Stream.Status.OPEN, connected="", kind=Stream.Kind.REQUEST,
                finished_ago=None, request_id="7", worker="w1", tool="progress", reconnects=0, lease=30,
                **kwargs) -> Stream:
    """A stream with `events` messages after its priming event (if any); a finished one ends with its response."""
    now = timezone.now()
    created = now - timedelta(seconds=60)
    finished = now - timedelta(seconds=finished_ago) if finished_ago is not None else (
        None if status == Stream.Status.OPEN else now)
    stream = Stream.objects.create(
        session=session, kind=kind, method="tools/call" if kind == Stream.Kind.REQUEST else "",
        tool_name=tool if kind == Stream.Kind.REQUEST else "",
        request_id=request_id if kind == Stream.Kind.REQUEST else "", status=status, worker=worker,
        connected_worker=connected, connected_at=created if connected else None, created_at=created,
        finished_at=finished, reconnects=reconnects, disconnect_policy="after_seconds", retry_ms=1000,
        lease_expires_at=now + timedelta(seconds=lease) if kind == Stream.Kind.REQUEST else None, **kwargs,
    )
    rows = []
    if primed:
        rows.append(Event(stream=stream, seq=0, kind=Event.Kind.PRIMING, payload="", created_at=created))
    for i in range(1, events + 1):
        final = status != Stream.Status.OPEN and i == events
        payload = json.dumps({"jsonrpc": "2.0", "id": json.loads(request_id), "result": {"content": []}}) \
            if final else progress(i, events)
        rows.append(Event(stream=stream, seq=i, kind=Event.Kind.FINAL if final else Event.Kind.MESSAGE,
                          payload=payload, created_at=created + timedelta(seconds=i)))
    Event.objects.bulk_create(rows)
    Stream.objects.filter(pk=stream.pk).update(last_seq=events, last_event_at=created + timedelta(seconds=events))
    stream.refresh_from_db()
    return stream


def make_worker(worker_id="w1", *, stale=False) -> Worker:
    """A worker row: alive (heartbeat now), or stale (silent for an hour: stopped or killed)."""
    return Worker.objects.create(id=worker_id, host="h", pid=1,
                                 heartbeat_at=timezone.now() - timedelta(hours=1 if stale else 0))


def make_task(*, status=Task.Status.WORKING, session=None, tool="slow_compute", runner="process", worker="w1",
              **kwargs) -> Task:
    now = timezone.now()
    fields = dict(created_at=now - timedelta(seconds=30), updated_at=now, lease_expires_at=now + timedelta(seconds=30))
    if status not in Task.ACTIVE:
        fields["finished_at"] = now
    fields.update(kwargs)
    fields.setdefault("principal", "user:1")
    return Task.objects.create(id=str(next(_counter)), status=status, session=session, tool=tool,
                               request=json.dumps({"name": tool, "arguments": {}}), runner=runner, worker=worker,
                               **fields)


def about_task(task_id: str, message: dict) -> str:
    """A message as a 2025-11-25 task's host stores it: marked with the related-task `_meta`."""
    return jsonrpc.dumps(tasks.with_related(message, task_id))


def make_staff(django_user_model, *perms, username="operator"):
    user = django_user_model.objects.create_user(username=username, password="pw", is_staff=True)
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
    return user


@pytest.fixture
def layer():
    """A channel in every group the operations talk to, and what arrived on it."""
    channel_layer = get_channel_layer()
    channel = async_to_sync(channel_layer.new_channel)()
    groups = [relay.ALL_WORKERS, relay.worker_group("w1"), relay.worker_group("w2")]
    for group in groups:
        async_to_sync(channel_layer.group_add)(group, channel)

    def received():
        queue = channel_layer.channels.get(channel)
        messages = []
        while queue is not None and not queue.empty():
            messages.append(queue.get_nowait()[1])
        return messages

    yield received
    received()
    for group in groups:
        async_to_sync(channel_layer.group_discard)(group, channel)


@pytest.fixture
def web():
    """Django's test client (this suite's `client` fixture is the MCP one)."""
    from django.test import Client

    return Client()


def text(response) -> str:
    return response.content.decode()


def flat(html: str) -> str:
    return re.sub(r"\s+", " ", html)


def result_rows(page: str) -> list[str]:
    """The change list's rows (Django 6.1 renders the filters, which name the same values, before them)."""
    return page.split('id="result_list"', 1)[1].split("<tr")[1:]


# Pages


def test_session_list_shows_clients_states_and_counts(admin_client):
    active = make_session(client="claude-code")
    make_stream(active, events=4)
    make_stream(active, kind=Stream.Kind.STANDALONE, events=2)
    make_session(client="old-client", idle=200_000)
    make_session(client="gone", terminated=timezone.now())
    response = admin_client.get(SESSIONS)
    assert response.status_code == 200
    page = flat(text(response))
    for name in ("claude-code 1.2", "old-client 1.2", "gone 1.2"):
        assert name in page
    for state in ("mcp-active", "mcp-expired", "mcp-terminated"):
        assert f'class="mcp-badge {state}"' in page
    # Two streams: 4 events + priming, 2 events + priming.
    assert f'?session__id__exact={active.pk}">2 streams</a>' in page
    row = next(r for r in result_rows(page) if "claude-code" in r)
    assert '<td class="field-events">8</td>' in row


def test_stream_list_shows_kind_state_worker_and_last_event(admin_client):
    make_worker("w1")
    session = make_session()
    connected = make_stream(session, connected="w1", tool="progress", request_id='"abc"')
    resumable = make_stream(session, tool="slow")
    completed = make_stream(session, status=Stream.Status.COMPLETED, tool="echo")
    failed = make_stream(session, status=Stream.Status.FAILED, tool="boom")
    expired = make_stream(session, status=Stream.Status.COMPLETED, finished_ago=7200, tool="old")
    standalone = make_stream(session, kind=Stream.Kind.STANDALONE, events=1)
    page = flat(text(admin_client.get(STREAMS)))

    def row(stream):
        return next(r for r in result_rows(page) if f'/stream/{stream.pk}/change/' in r)

    assert "connected now" in row(connected) and "w1" in row(connected)
    assert "tools/call" in row(connected) and "<strong>progress</strong>" in row(connected)
    assert "id &quot;abc&quot;" in row(connected)
    assert "mcp-resumable" in row(resumable)
    assert "mcp-completed" in row(completed)
    assert "mcp-failed" in row(failed)
    assert "mcp-expired" in row(expired)
    assert "GET stream" in row(standalone)
    assert f"{connected.pk}-3" in row(connected)  # last event id
    assert f'?stream__id__exact={connected.pk}">4</a>' in row(connected)  # priming + 3
    # The disconnect policy is on the stream's page (the list keeps its state column on narrow screens).
    detail = text(admin_client.get(reverse("admin:mcp_transport_stream_change", args=[connected.pk])))
    assert "after_seconds, retry 1000 ms" in detail


def test_stream_list_filters_active_and_resumable_on_top(admin_client):
    make_worker("w1")
    make_worker("stopped", stale=True)
    session = make_session()
    open_connected = make_stream(session, connected="w1")
    open_idle = make_stream(session)
    held_by_stopped = make_stream(session, kind=Stream.Kind.STANDALONE, connected="stopped")
    recent = make_stream(session, status=Stream.Status.COMPLETED)
    failed = make_stream(session, status=Stream.Status.FAILED)
    cancelled = make_stream(session, status=Stream.Status.CANCELLED)
    old = make_stream(session, status=Stream.Status.COMPLETED, finished_ago=7200)
    dead_session = make_session(terminated=timezone.now())
    of_terminated = make_stream(dead_session, status=Stream.Status.CANCELLED)
    open_of_terminated = make_stream(dead_session, kind=Stream.Kind.STANDALONE)

    def listed(query):
        response = admin_client.get(STREAMS + query)
        assert response.status_code == 200
        return {s.pk for s in response.context["cl"].result_list}

    assert listed("?state=active") == {open_connected.pk, open_idle.pk, held_by_stopped.pk, open_of_terminated.pk}
    # Only what a client can resume: open, no connection on a live worker, its session active.
    assert listed("?state=resumable") == {open_idle.pk, held_by_stopped.pk}
    assert listed("?state=connected") == {open_connected.pk}
    assert listed("?state=expired") == {old.pk, open_of_terminated.pk}
    assert listed("?status=completed") == {recent.pk, old.pk}
    assert {failed.pk, cancelled.pk, of_terminated.pk}.isdisjoint(listed("?state=resumable"))
    assert listed("?kind=standalone") == {held_by_stopped.pk, open_of_terminated.pk}
    page = text(admin_client.get(STREAMS))
    # The quick tabs come first, before the search box and the list.
    assert page.index('id="mcp-stream-tabs"') < page.index('id="changelist-search"')
    assert 'data-state="active"' in page and 'data-state="resumable"' in page


def test_session_links_to_its_streams(admin_client):
    one, other = make_session(client="one"), make_session(client="other")
    mine = {make_stream(one).pk, make_stream(one, kind=Stream.Kind.STANDALONE).pk}
    make_stream(other)
    response = admin_client.get(STREAMS + f"?session__id__exact={one.pk}")
    assert {s.pk for s in response.context["cl"].result_list} == mine
    assert "Streams of session" in text(response) and one.pk in text(response)
    # The tabs keep the session filter.
    assert f"session__id__exact={one.pk}&amp;state=active" in text(response)


def test_session_filters_and_search(admin_client, django_user_model):
    alice = django_user_model.objects.create_user(username="alice", password="pw")
    active = make_session("a" * 32, client="claude-code", user=alice, principal=f"user:{alice.pk}")
    expired = make_session("b" * 32, client="cursor", idle=200_000)
    terminated = make_session("c" * 32, client="cursor", terminated=timezone.now(), version="2025-06-18")

    def listed(query):
        response = admin_client.get(SESSIONS + query)
        assert response.status_code == 200
        return {s.pk for s in response.context["cl"].result_list}

    assert listed("?state=active") == {active.pk}
    assert listed("?state=expired") == {expired.pk}
    assert listed("?state=terminated") == {terminated.pk}
    assert listed("?protocol_version=2025-06-18") == {terminated.pk}
    assert listed("?client_name=cursor") == {expired.pk, terminated.pk}
    assert listed("?q=aaaa") == {active.pk}  # id prefix
    assert listed("?q=claude") == {active.pk}
    assert listed("?q=alice") == {active.pk}  # user
    assert listed(f"?q=user:{alice.pk}") == {active.pk}  # principal
    assert listed("?q=nothing-like-it") == set()


def test_stream_search_by_tool_session_stream_id_and_event_id(admin_client):
    session = make_session("d" * 32)
    a = make_stream(session, tool="rebuild_index")
    b = make_stream(make_session(), tool="echo")

    def listed(query):
        return {s.pk for s in admin_client.get(STREAMS + query).context["cl"].result_list}

    assert listed("?q=rebuild") == {a.pk}
    assert listed("?q=dddd") == {a.pk}
    assert listed(f"?q={b.pk}") == {b.pk}
    assert listed(f"?q={b.pk}-2") == {b.pk}


def test_stream_page_shows_timeline_connections_and_events_in_order(admin_client):
    session = make_session()
    stream = make_stream(session, events=5, status=Stream.Status.COMPLETED, reconnects=1)
    t0 = stream.created_at
    StreamConnection.objects.create(stream=stream, worker="w1", opened_at=t0, closed_at=t0 + timedelta(seconds=2),
                                    close_reason="admin")
    StreamConnection.objects.create(stream=stream, worker="w2", opened_at=t0 + timedelta(seconds=3),
                                    closed_at=t0 + timedelta(seconds=6), resumed_from=2, close_reason="completed")
    response = admin_client.get(reverse("admin:mcp_transport_stream_change", args=[stream.pk]))
    assert response.status_code == 200
    page = text(response)
    start = page.index('class="mcp-timeline"')
    svg = page[start:page.index("</svg>", start)]
    assert svg.count('class="event ') == 6  # priming + 5
    assert svg.count('<rect class="conn') == 2
    assert svg.count('class="reconnect"') == 1
    assert svg.count('class="disconnect"') == 1 and ">admin</text>" in svg
    # Events in order, the priming one marked, payloads pretty-printed.
    ids = re.findall(rf">({stream.pk}-\d+)</a>", page)
    assert ids == [f"{stream.pk}-{i}" for i in range(6)]
    assert "priming event: empty data" in page
    assert "&quot;method&quot;: &quot;notifications/progress&quot;," in page  # indented JSON, one key a line
    assert 'class="mcp-reason">admin<' in page
    # Read-only: no form fields, no save button; a finished stream offers no operations.
    assert 'name="_save"' not in page
    assert "mcp-close-connection" not in page and "mcp-cancel-request" not in page


def test_stream_page_offers_close_and_cancel_while_open(admin_client):
    make_worker("w1")
    stream = make_stream(make_session(), connected="w1")
    page = text(admin_client.get(reverse("admin:mcp_transport_stream_change", args=[stream.pk])))
    assert 'id="mcp-close-connection"' in page and 'id="mcp-cancel-request"' in page
    assert "connected now" in page


def test_stream_page_pages_through_many_events(admin_client):
    stream = make_stream(make_session(), events=120)
    url = reverse("admin:mcp_transport_stream_change", args=[stream.pk])
    first = text(admin_client.get(url))
    assert "page 1 of 3" in first and f">{stream.pk}-49</a>" in first and f">{stream.pk}-50</a>" not in first
    last = text(admin_client.get(url + "?events=3"))
    assert f">{stream.pk}-100</a>" in last and f">{stream.pk}-120</a>" in last and f">{stream.pk}-99</a>" not in last
    assert admin_client.get(url + "?events=oops").status_code == 200


def test_event_pages(admin_client):
    stream = make_stream(make_session(), events=3, status=Stream.Status.COMPLETED)
    response = admin_client.get(EVENTS + f"?stream__id__exact={stream.pk}")
    rows = response.context["cl"].result_list
    assert [e.seq for e in rows] == [0, 1, 2, 3]  # one stream's events in order
    page = text(response)
    assert "priming (empty data" in page and "notifications/progress 1/3 step 1" in page
    assert "result for id 7" in page
    final = Event.objects.get(stream=stream, seq=3)
    detail = text(admin_client.get(reverse("admin:mcp_transport_event_change", args=[final.pk])))
    assert "&quot;result&quot;: {" in detail and 'name="_save"' not in detail
    found = admin_client.get(EVENTS + f"?q={stream.pk}-2").context["cl"].result_list
    assert [e.event_id for e in found] == [f"{stream.pk}-2"]
    assert admin_client.get(EVENTS + "?kind=priming").context["cl"].result_list[0].kind == "priming"


def test_streams_of_a_deleted_session_show_how_they_ended(admin_client):
    """Normal clients DELETE their session at exit: its streams keep their outcome in the lists."""
    deleted = make_session(terminated=timezone.now())
    ended = {status: make_stream(deleted, status=status)
             for status in (Stream.Status.COMPLETED, Stream.Status.FAILED, Stream.Status.CANCELLED)}
    page = flat(text(admin_client.get(STREAMS)))
    session_page = flat(text(admin_client.get(reverse("admin:mcp_transport_session_change", args=[deleted.pk]))))
    for status, stream in ended.items():
        row = next(r for r in result_rows(page) if f'/stream/{stream.pk}/change/' in r)
        assert f'class="mcp-badge mcp-{status}"' in row and "mcp-expired" not in row
        in_session = next(r for r in session_page.split("<tr") if f'/stream/{stream.pk}/change/' in r)
        assert f"mcp-{status}" in in_session


def test_a_stream_held_by_a_stopped_worker_is_not_connected(admin_client):
    """The worker liveness rule of mcp_status: a connection counts only on a worker that is not stale."""
    make_worker("gone", stale=True)
    stream = make_stream(make_session(), kind=Stream.Kind.STANDALONE, connected="gone", worker="gone")
    page = flat(text(admin_client.get(STREAMS)))
    row = next(r for r in result_rows(page) if f'/stream/{stream.pk}/change/' in r)
    assert "mcp-resumable" in row and "connected now" not in row and "worker gone" in row
    detail = text(admin_client.get(reverse("admin:mcp_transport_stream_change", args=[stream.pk])))
    assert "connected now" not in detail and "conn live" not in detail
    assert 'class="mcp-badge mcp-resumable"' in detail


@pytest.mark.parametrize("page", ["session", "stream", "worker", "task", "event"])
def test_detail_pages_show_times_to_the_second(admin_client, page):
    at = timezone.now().replace(hour=14, minute=0, second=7, microsecond=0)
    session = make_session()
    Session.objects.filter(pk=session.pk).update(created_at=at)
    stream = make_stream(session, status=Stream.Status.COMPLETED)
    Stream.objects.filter(pk=stream.pk).update(created_at=at)
    Event.objects.filter(stream=stream, seq=1).update(created_at=at)
    objects = {"session": session.pk, "stream": stream.pk, "worker": make_worker("w7").pk,
               "task": make_task(created_at=at).pk, "event": Event.objects.get(stream=stream, seq=1).pk}
    if page == "worker":
        Worker.objects.filter(pk="w7").update(started_at=at)
    html = text(admin_client.get(reverse(f"admin:mcp_transport_{page}_change", args=[objects[page]])))
    assert timezone.localtime(at).strftime("%Y-%m-%d %H:%M:%S") in html
    assert "p.m." not in html and "a.m." not in html


def test_task_list_filters_by_status_and_shows_who_what_where_and_how_long(admin_client):
    make_worker("w1")
    made = {status: make_task(status=status, tool=f"tool_{status}") for status in Task.Status.values}
    queued = make_task(runner="django_tasks", worker="", tool="queued_tool", principal="token:abcd")
    filters = flat(text(admin_client.get(TASKS)))
    for label in ("Working", "Input required", "Completed", "Failed", "Cancelled"):
        assert f">{label}</a>" in filters
    for status, task in made.items():
        listed = {t.pk for t in admin_client.get(TASKS + f"?status__exact={status}").context["cl"].result_list}
        assert listed == ({task.pk, queued.pk} if status == Task.Status.WORKING else {task.pk})
    page = flat(text(admin_client.get(TASKS)))
    row = next(r for r in result_rows(page) if "queued_tool" in r)
    assert "token:abcd" in row and "django_tasks" in row and "s so far" in row
    done = next(r for r in result_rows(page) if "tool_completed" in r)
    assert "30.0 s" in done and "user:1" in done and "so far" not in done


def test_task_page_shows_the_timeline_of_its_events(admin_client):
    session = make_session()
    task = make_task(status=Task.Status.COMPLETED, session=session, tool="progress")
    other = make_task(session=session)
    t0 = task.created_at
    events = [
        (task, "message", about_task(task.pk, jsonrpc.notification(
            "notifications/progress", {"progressToken": "p", "progress": 1, "total": 2, "message": "step 1"}))),
        (task, "message", about_task(task.pk, jsonrpc.notification(
            "notifications/message", {"level": "info", "data": "half way"}))),
        (other, "message", about_task(other.pk, jsonrpc.notification(
            "notifications/progress", {"progressToken": "q", "progress": 9}))),
        (task, "question", json.dumps({"confirm": {"method": "elicitation/create", "params": {"message": "Sure?"}}})),
        (task, "status", json.dumps({"status": "working", "answered": ["confirm"]})),
        (task, "message", about_task(task.pk, jsonrpc.notification(
            "notifications/progress", {"progressToken": "p", "progress": 2, "total": 2}))),
        (task, "status", json.dumps({"status": "completed"})),
    ]
    TaskEvent.objects.bulk_create([
        TaskEvent(task=owner, kind=kind, payload=payload, created_at=t0 + timedelta(seconds=i))
        for i, (owner, kind, payload) in enumerate(events, start=1)])
    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get(reverse("admin:mcp_transport_task_change", args=[task.pk]))
    assert response.status_code == 200
    assert not [q["sql"] for q in queries if re.search(r"mcp_transport_event\b", q["sql"])]  # the task's own rows
    page = text(response)
    start = page.index('class="mcp-timeline"')
    svg = page[start:page.index("</svg>", start)]
    assert 'aria-label="Task timeline"' in svg and ">status</text>" in svg
    assert svg.count('class="event message"') == 3  # two progress notifications and the log message
    assert svg.count('class="event status"') == 1 and svg.count('class="event question"') == 1
    assert svg.count('class="event final"') == 1
    assert "progress (process runner)" in svg and "ended completed" in svg and "conn live" not in svg
    events = page[page.index('id="mcp-task-events"'):]
    assert "Events (6)" in events
    summaries = re.findall(r"<td>((?:notifications|asks|status)[^<]*)</td>", events)
    assert summaries == ["notifications/progress 1/2 step 1", "notifications/message info",
                         "asks confirm: elicitation/create", "status working (answered confirm)",
                         "notifications/progress 2/2", "status completed"]
    assert "progress 9" not in events  # the other task's


def test_a_working_task_page_offers_cancel_and_a_task_without_events_says_why(admin_client):
    make_worker("w1")
    task = make_task(status_message="Waiting for confirmation")
    page = text(admin_client.get(reverse("admin:mcp_transport_task_change", args=[task.pk])))
    assert 'id="mcp-cancel-task"' in page
    assert "conn live" in page and "working now" in page
    assert "No events stored for this task" in page
    done = make_task(status=Task.Status.FAILED, status_message="It could not be queued")
    page = text(admin_client.get(reverse("admin:mcp_transport_task_change", args=[done.pk])))
    assert 'id="mcp-cancel-task"' not in page
    assert 'class="disconnect"' in page and "ended failed: It could not be queued" in page


def test_cancel_a_task_from_its_page_tells_its_worker(admin_client, layer):
    make_worker("w1")
    task = make_task()
    url = reverse("admin:mcp_transport_task_cancel", args=[task.pk])
    assert "Cancel the task" in text(admin_client.get(url))
    assert Task.objects.get(pk=task.pk).status == Task.Status.WORKING  # asking is not doing
    response = admin_client.post(url)
    assert response.status_code == 302
    assert Task.objects.get(pk=task.pk).status == Task.Status.CANCELLED
    assert [m for m in layer() if m.get("task") == task.pk][0]["action"] == "cancel"
    assert LogEntry.objects.filter(object_id=task.pk).exists()


def test_cancel_tasks_action_confirms_and_leaves_finished_ones(admin_client, layer):
    make_worker("w1")
    working, waiting = make_task(), make_task(status=Task.Status.INPUT_REQUIRED)
    done = make_task(status=Task.Status.COMPLETED)
    data = {"action": "cancel_tasks", "_selected_action": [working.pk, waiting.pk, done.pk]}
    confirm = admin_client.post(TASKS, data)
    assert confirm.status_code == 200 and "Cancel these tasks" in text(confirm)
    assert not Task.objects.filter(status=Task.Status.CANCELLED).exists()
    admin_client.post(TASKS, {**data, "confirm": "yes"})
    assert dict(Task.objects.values_list("pk", "status")) == {
        working.pk: Task.Status.CANCELLED, waiting.pk: Task.Status.CANCELLED, done.pk: Task.Status.COMPLETED}


def test_session_page_lists_its_streams_and_offers_terminate(admin_client):
    session = make_session()
    stream = make_stream(session)
    page = text(admin_client.get(reverse("admin:mcp_transport_session_change", args=[session.pk])))
    assert 'id="mcp-terminate-session"' in page
    assert f'/stream/{stream.pk}/change/' in page
    assert "Streams: 1, with 4 events" in page


def test_worker_list(admin_client):
    Worker.objects.create(id="w1", host="h", pid=1)
    Worker.objects.create(id="w2", host="h", pid=2, heartbeat_at=timezone.now() - timedelta(hours=1))
    make_stream(make_session(), connected="w1", worker="w1")
    page = flat(text(admin_client.get(WORKERS)))
    assert "alive" in page and "silent" in page
    row = next(r for r in result_rows(page) if ">w1<" in r)
    assert '<td class="field-holding">1</td>' in row and '<td class="field-running">1</td>' in row


# Operations


def test_close_connection_from_the_stream_page(admin_client, layer):
    stream = make_stream(make_session(), connected="w1")
    url = reverse("admin:mcp_transport_stream_close", args=[stream.pk])
    response = admin_client.post(url)
    assert response.status_code == 302 and response["Location"].endswith(f"/stream/{stream.pk}/change/")
    assert layer() == [{"type": "mcp.close", "stream": stream.pk, "retry": None, "reason": "admin",
                        "origin": "admin"}]
    assert "Closing the connection of stream" in text(admin_client.get(response["Location"]))
    assert LogEntry.objects.filter(object_id=str(stream.pk), change_message__startswith="Closing").exists()
    # GET asks first.
    assert "Close connection now" in text(admin_client.get(url))


def test_close_connection_of_a_finished_stream_does_nothing(admin_client, layer):
    stream = make_stream(make_session(), status=Stream.Status.COMPLETED)
    response = admin_client.post(reverse("admin:mcp_transport_stream_close", args=[stream.pk]), follow=True)
    assert layer() == []
    assert "has no connection to close" in text(response)


def test_cancel_request_tells_its_worker(admin_client, layer):
    stream = make_stream(make_session(), worker="w2", request_id='"req-9"')
    url = reverse("admin:mcp_transport_stream_cancel", args=[stream.pk])
    confirm = admin_client.get(url)
    assert "Yes, cancel the request" in text(confirm)
    assert layer() == []
    admin_client.post(url, {"confirm": "yes"})
    assert layer() == [{"type": "mcp.cancel", "session": stream.session_id, "request": "req-9",
                        "reason": "Cancelled by an operator", "by": "operator", "origin": "admin"}]


def test_cancel_request_of_a_dead_worker_fails_it_now(admin_client, layer):
    stream = make_stream(make_session(), worker="gone", lease=-5)
    admin_client.post(reverse("admin:mcp_transport_stream_cancel", args=[stream.pk]), {"confirm": "yes"})
    stream.refresh_from_db()
    assert stream.status == Stream.Status.FAILED
    final = Event.objects.get(stream=stream, kind=Event.Kind.FINAL)
    assert json.loads(final.payload)["error"]["data"]["reason"] == "worker_lost"
    assert layer() == [{"type": "mcp.wake", "stream": stream.pk, "seq": stream.last_seq, "origin": "admin"}]


def test_terminate_session(admin_client, layer):
    session = make_session()
    running = make_stream(session, worker="w1", connected="w2", request_id="3")
    standalone = make_stream(session, kind=Stream.Kind.STANDALONE, connected="w1")
    done = make_stream(session, status=Stream.Status.COMPLETED)
    url = reverse("admin:mcp_transport_session_terminate", args=[session.pk])
    assert "Yes, terminate" in text(admin_client.get(url))
    response = admin_client.post(url, {"confirm": "yes"}, follow=True)
    assert "Terminated session" in text(response)
    session.refresh_from_db()
    assert session.terminated_at is not None
    assert {s.pk: s.status for s in session.streams.all()} == {
        running.pk: "cancelled", standalone.pk: "cancelled", done.pk: "completed"}
    assert store.get_session(session.pk, session.server) is None  # clients get 404
    sent = layer()
    assert {"type": "mcp.cancel", "session": session.pk, "request": 3, "reason": "Session terminated by an operator",
            "origin": "admin"} in sent
    assert {"type": "mcp.end", "stream": running.pk, "origin": "admin"} in sent
    assert {"type": "mcp.end", "stream": standalone.pk, "origin": "admin"} in sent
    assert {"type": "mcp.session_end", "session": session.pk, "origin": "admin"} in sent
    # Twice is nothing.
    again = admin_client.post(url, {"confirm": "yes"}, follow=True)
    assert "already terminated" in text(again) or "Nothing to do" in text(again)


def test_terminate_sessions_action_confirms_first(admin_client, layer):
    one, two, keep = make_session(), make_session(), make_session()
    data = {"action": "terminate_sessions", "_selected_action": [one.pk, two.pk]}
    confirm = admin_client.post(SESSIONS, data)
    assert confirm.status_code == 200 and "Yes, terminate" in text(confirm)
    assert Session.objects.terminated().count() == 0
    admin_client.post(SESSIONS, {**data, "confirm": "yes"})
    assert set(Session.objects.terminated().values_list("id", flat=True)) == {one.pk, two.pk}
    assert Session.objects.get(pk=keep.pk).terminated_at is None


def test_stream_actions(admin_client, layer):
    session = make_session()
    a, b = make_stream(session, connected="w1"), make_stream(session, worker="w1", request_id="5")
    admin_client.post(STREAMS, {"action": "close_connections", "_selected_action": [a.pk, b.pk]})
    assert [m["stream"] for m in layer() if m["type"] == "mcp.close"] == sorted([a.pk, b.pk], reverse=True)
    confirm = admin_client.post(STREAMS, {"action": "cancel_requests", "_selected_action": [b.pk]})
    assert "Yes, cancel the requests" in text(confirm) and layer() == []
    admin_client.post(STREAMS, {"action": "cancel_requests", "_selected_action": [b.pk], "confirm": "yes"})
    assert [m["request"] for m in layer()] == [5]


def test_prune_is_the_prune_command(admin_client):
    old = make_session(idle=200_000)
    make_stream(old, status=Stream.Status.COMPLETED)
    live = make_session()
    expired_stream = make_stream(live, status=Stream.Status.COMPLETED, finished_ago=7200)
    kept = make_stream(live)
    url = reverse("admin:mcp_transport_session_prune")
    assert 'id="mcp-prune"' in text(admin_client.get(SESSIONS))
    preview = flat(text(admin_client.get(url)))
    assert "<li>1 session</li>" in preview and "<li>2 streams</li>" in preview
    response = admin_client.post(url, follow=True)
    assert "Pruned" in text(response)
    assert list(Session.objects.values_list("id", flat=True)) == [live.pk]
    assert list(Stream.objects.values_list("id", flat=True)) == [kept.pk]
    assert not Event.objects.filter(stream_id=expired_stream.pk).exists()


# Permissions


def test_staff_without_permissions_gets_403(web, django_user_model):
    make_staff(django_user_model)
    web.login(username="operator", password="pw")
    session = make_session()
    stream = make_stream(session)
    event = Event.objects.filter(stream=stream).first()
    for url in (SESSIONS, STREAMS, EVENTS, WORKERS,
                reverse("admin:mcp_transport_session_change", args=[session.pk]),
                reverse("admin:mcp_transport_stream_change", args=[stream.pk]),
                reverse("admin:mcp_transport_event_change", args=[event.pk])):
        assert web.get(url).status_code == 403, url
    for url in (reverse("admin:mcp_transport_stream_close", args=[stream.pk]),
                reverse("admin:mcp_transport_stream_cancel", args=[stream.pk]),
                reverse("admin:mcp_transport_session_terminate", args=[session.pk]),
                reverse("admin:mcp_transport_session_prune")):
        assert web.post(url, {"confirm": "yes"}).status_code == 403, url
    assert Stream.objects.get(pk=stream.pk).status == "open" and Session.objects.active().count() == 1
    assert "MCP transport" not in text(web.get(reverse("admin:index")))


def test_view_permission_sees_but_cannot_operate(web, django_user_model, layer):
    make_staff(django_user_model, "mcp_transport.view_session", "mcp_transport.view_stream",
               "mcp_transport.view_event")
    web.login(username="operator", password="pw")
    session = make_session()
    stream = make_stream(session, connected="w1")
    assert web.get(SESSIONS).status_code == 200
    page = text(web.get(reverse("admin:mcp_transport_stream_change", args=[stream.pk])))
    assert "<svg" in page and "mcp-close-connection" not in page and "mcp-cancel-request" not in page
    assert "mcp-terminate-session" not in text(web.get(reverse("admin:mcp_transport_session_change",
                                                                  args=[session.pk])))
    assert 'id="mcp-prune"' not in text(web.get(SESSIONS))
    assert web.get(STREAMS).context["action_form"] is None  # no actions at all
    assert web.post(reverse("admin:mcp_transport_stream_close", args=[stream.pk])).status_code == 403
    assert web.post(STREAMS, {"action": "close_connections", "_selected_action": [stream.pk]}).status_code == 200
    assert layer() == []


def test_change_stream_permission_allows_close_and_cancel_only(web, django_user_model, layer):
    make_staff(django_user_model, "mcp_transport.view_stream", "mcp_transport.change_stream",
               "mcp_transport.view_session")
    web.login(username="operator", password="pw")
    session = make_session()
    stream = make_stream(session, connected="w1")
    assert web.post(reverse("admin:mcp_transport_stream_close", args=[stream.pk])).status_code == 302
    assert web.post(reverse("admin:mcp_transport_stream_cancel", args=[stream.pk]),
                       {"confirm": "yes"}).status_code == 302
    assert [m["type"] for m in layer()] == ["mcp.close", "mcp.cancel"]
    assert web.post(reverse("admin:mcp_transport_session_terminate", args=[session.pk]),
                       {"confirm": "yes"}).status_code == 403
    assert web.post(reverse("admin:mcp_transport_session_prune")).status_code == 403
    assert Session.objects.get(pk=session.pk).terminated_at is None


def test_prune_needs_both_delete_permissions(web, django_user_model):
    make_staff(django_user_model, "mcp_transport.view_session", "mcp_transport.delete_session")
    web.login(username="operator", password="pw")
    assert web.post(reverse("admin:mcp_transport_session_prune")).status_code == 403
    make_staff(django_user_model, "mcp_transport.view_session", "mcp_transport.delete_session",
               "mcp_transport.delete_stream", username="pruner")
    web.login(username="pruner", password="pw")
    assert web.post(reverse("admin:mcp_transport_session_prune")).status_code == 302


@pytest.mark.parametrize("model", ["session", "stream", "event", "worker"])
def test_nothing_is_added_edited_or_deleted_by_hand(admin_client, model):
    session = make_session()
    stream = make_stream(session)
    Worker.objects.create(id="w1", host="h", pid=1)
    obj = {"session": session, "stream": stream, "event": Event.objects.filter(stream=stream).first(),
           "worker": Worker.objects.get()}[model]
    assert admin_client.get(reverse(f"admin:mcp_transport_{model}_add")).status_code == 403
    change = reverse(f"admin:mcp_transport_{model}_change", args=[obj.pk])
    assert 'name="_save"' not in text(admin_client.get(change))
    assert admin_client.post(change, {"status": "completed", "payload": "x"}).status_code == 403
    assert admin_client.post(reverse(f"admin:mcp_transport_{model}_delete", args=[obj.pk]),
                             {"post": "yes"}).status_code == 403
    changelist = admin_client.get(reverse(f"admin:mcp_transport_{model}_changelist"))
    assert "delete_selected" not in text(changelist)
    assert type(obj).objects.filter(pk=obj.pk).exists()
    stream.refresh_from_db()
    assert stream.status == "open"


# Query counts: a fixed number of queries whatever the number of rows on the page


def _seed(sessions: int, streams_per_session: int):
    for _ in range(sessions):
        session = make_session()
        for _ in range(streams_per_session):
            make_stream(session, events=2, connected="w1")
        StreamConnection.objects.create(stream=session.streams.first(), worker="w1", resumed_from=1,
                                        closed_at=timezone.now(), close_reason="policy")
        Worker.objects.create(id=f"w-{session.pk}", host="h", pid=1)


@pytest.mark.parametrize("url", [SESSIONS, STREAMS, EVENTS, WORKERS, STREAMS + "?state=resumable",
                                 SESSIONS + "?state=active&q=inspector", EVENTS + "?kind=message"])
def test_changelist_queries_do_not_grow_with_rows(admin_client, django_assert_num_queries, url):
    _seed(2, 1)
    admin_client.get(url)  # warm up (content types, the session)
    with CaptureQueriesContext(connection) as few:
        assert admin_client.get(url).status_code == 200
    _seed(60, 2)  # more than a page of sessions, streams and events
    response = None
    with django_assert_num_queries(len(few.captured_queries)):
        response = admin_client.get(url)
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) > 10


def test_detail_page_queries_do_not_grow_with_events(admin_client, django_assert_num_queries):
    small = make_stream(make_session(), events=3)
    big = make_stream(make_session(), events=3000)
    for stream in (small, big):
        for i in range(3):
            StreamConnection.objects.create(stream=stream, worker="w1", resumed_from=i, close_reason="policy",
                                            closed_at=timezone.now())
    admin_client.get(reverse("admin:mcp_transport_stream_change", args=[small.pk]))
    with CaptureQueriesContext(connection) as few:
        admin_client.get(reverse("admin:mcp_transport_stream_change", args=[small.pk]))
    with django_assert_num_queries(len(few.captured_queries)):
        response = admin_client.get(reverse("admin:mcp_transport_stream_change", args=[big.pk]))
    page = text(response)
    assert page.count('class="event ') == timeline.MAX_EVENTS
    assert "500 of 3001 events drawn" in page


def test_task_page_queries_do_not_grow_with_its_events(admin_client, django_assert_num_queries):
    pages = {}
    for count in (3, 800):
        task = make_task()
        TaskEvent.objects.bulk_create([
            TaskEvent(task=task, payload=jsonrpc.dumps(jsonrpc.notification(
                "notifications/progress", {"progressToken": "p", "progress": i, "total": count})))
            for i in range(1, count + 1)])
        pages[count] = reverse("admin:mcp_transport_task_change", args=[task.pk])
    admin_client.get(pages[3])
    with CaptureQueriesContext(connection) as few:
        admin_client.get(pages[3])
    with django_assert_num_queries(len(few.captured_queries) + 1):  # + the count past MAX_EVENTS
        response = admin_client.get(pages[800])
    page = text(response)
    assert page.count('class="event message"') == timeline.MAX_EVENTS
    assert "500 of 800 events drawn (the newest)" in page and "Events (800)" in page
    assert "The newest 100 of 800." in page and "notifications/progress 800/800" in page


# Pieces


def test_sample_seqs_spreads_evenly_and_keeps_both_ends():
    assert timeline.sample_seqs(0, 9) == list(range(10))
    picked = timeline.sample_seqs(0, 999_999)
    assert len(picked) == 500 and picked[0] == 0 and picked[-1] == 999_999
    gaps = {b - a for a, b in zip(picked, picked[1:])}
    assert max(gaps) - min(gaps) <= 1
    assert timeline.sample_seqs(1, 0) == []


def test_timeline_draws_a_live_connection_and_escapes_reasons():
    session = make_session()
    stream = make_stream(session, connected="w1", events=2)
    StreamConnection.objects.create(stream=stream, worker="w1", opened_at=stream.created_at,
                                    closed_at=stream.created_at + timedelta(seconds=1), close_reason="<x>")
    StreamConnection.objects.create(stream=stream, worker="w1", opened_at=stream.created_at + timedelta(seconds=2),
                                    resumed_from=1)
    svg = timeline.svg(stream, primed=True)
    assert svg.count('class="conn"') == 1 and svg.count('class="conn live"') == 1
    assert "connected now" in svg and "&lt;x&gt;" in svg and "<x>" not in svg


def test_timeline_of_a_stream_held_by_its_first_connection():
    stream = make_stream(make_session(), connected="w1", events=1)
    data = timeline.collect(stream, primed=True)
    assert len(data.spans) == 1 and data.spans[0].initial and data.spans[0].live and not data.spans[0].logged


def test_summaries_and_pretty_json():
    assert summarize("") .startswith("priming")
    assert summarize(progress(2, 5)) == "notifications/progress 2/5 step 2"
    assert summarize('{"jsonrpc":"2.0","id":3,"error":{"code":-32800,"message":"x"}}') == "error -32800 for id 3: x"
    assert summarize('{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage"}') == \
        "request sampling/createMessage"
    assert pretty_json('{"a":[1]}') == '{\n  "a": [\n    1\n  ]\n}'
    assert pretty_json("not json") == "not json"
    assert pretty_json('{"a":"' + "x" * 100 + '"}', limit=20).endswith("see the event's own page)")


# The operator's cancel, through the relay into the runner, in-process


async def _cancel_when_running(client, request_id: int, task):
    from mcp_transport.execution.worker import worker

    key = (client.session_id, json.dumps(request_id))
    for _ in range(2000):
        if key in worker.requests.inflight or task.done():
            break
        await asyncio.sleep(0.005)
    assert key in worker.requests.inflight, "the request never started"
    worker.relay.handle({"type": "mcp.cancel", "session": client.session_id, "request": request_id,
                        "reason": "too slow", "by": "operator", "origin": "admin"})


@pytest.mark.django_db(transaction=True)
async def test_operator_cancel_ends_a_streamed_request_with_an_error():
    from example_project.asgi import application
    from mcp_transport.testing import MCPCommunicator

    client = MCPCommunicator(application)
    await client.initialize()
    request_id = client._id + 1
    task = asyncio.ensure_future(client.call_tool("progress", {"count": 400, "delay": 0.02}, timeout=30))
    await _cancel_when_running(client, request_id, task)
    response = await task
    assert response.complete
    assert response.events[-1].message == {
        "jsonrpc": "2.0", "id": request_id,
        "error": {"code": -32800, "message": "Request cancelled by an operator", "data": {"reason": "too slow"}},
    }
    stream_id = int(response.events[-1].id.split("-")[0])
    status = await sync_to_async(lambda: Stream.objects.get(pk=stream_id).status)()
    assert status == Stream.Status.CANCELLED


@pytest.mark.django_db(transaction=True)
async def test_without_channel_layers_an_operators_cancel_reaches_this_process(settings):
    """The README's steps configure no CHANNEL_LAYERS: the operations of an admin served by the process
    that runs the request still reach it, through that process's own in-memory layer."""
    from example_project.asgi import application
    from mcp_transport.execution.worker import worker
    from mcp_transport.testing import MCPCommunicator

    client = MCPCommunicator(application)
    await client.initialize()
    request_id = client._id + 1
    task = asyncio.ensure_future(client.request(
        "tools/call", {"name": "progress", "arguments": {"count": 400, "delay": 0.02}, "_meta": {"progressToken": 1}},
        timeout=30))
    streams = Stream.objects.filter(session_id=client.session_id, kind=Stream.Kind.REQUEST)
    for _ in range(1000):  # under way: its stream stored, progress in it
        if task.done() or await sync_to_async(streams.filter(last_seq__gte=2).exists)():
            break
        await asyncio.sleep(0.01)
    assert not task.done(), "the request ended before the operator could cancel it"

    settings.CHANNEL_LAYERS = {}
    assert get_channel_layer() is None and relay.channel_layer() is relay.channel_layer()
    this_process = relay.Relay(worker.id, worker.bus)  # the worker's relay, as it starts without a layer
    this_process.handlers = dict(worker.relay.handlers)
    await this_process.start()
    try:
        assert this_process.layer is relay.channel_layer() and not this_process.remote
        stream = await sync_to_async(streams.get)()
        outcome = await sync_to_async(operations.cancel_request)(stream)
        assert outcome.done, outcome.message
        response = await asyncio.wait_for(task, 10)
        assert response.events[-1].message["error"]["code"] == -32800
    finally:
        worker.requests.cancel(client.session_id, request_id)
        for loop_task in list(this_process._tasks):
            loop_task.cancel()
        for group in (relay.ALL_WORKERS, relay.worker_group(worker.id)):
            await this_process.layer.group_discard(group, this_process.channel)


@pytest.mark.django_db(transaction=True)
async def test_operator_cancel_of_a_json_answered_request():
    from django.test import override_settings

    from example_project.asgi import application
    from mcp_transport.testing import MCPCommunicator

    with override_settings(MCP_TRANSPORT={"JSON_RESPONSE": True}):
        client = MCPCommunicator(application)
        await client.initialize()
        request_id = client._id + 1
        task = asyncio.ensure_future(client.call_tool("progress", {"count": 400, "delay": 0.02}, timeout=30))
        await _cancel_when_running(client, request_id, task)
        response = await task
    assert response.json["error"]["message"] == "Request cancelled by an operator"
    assert response.json["error"]["code"] == -32800

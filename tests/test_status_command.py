"""`manage.py mcp_status`: workers, their leases and in-flight requests, open and resumable streams."""
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from mcp_transport.models import Session, Stream, Worker

pytestmark = pytest.mark.django_db

LEASE = {"LEASE_SECONDS": 30}


def run(*args) -> str:
    out = StringIO()
    call_command("mcp_status", *args, stdout=out)
    return out.getvalue()


def status(*args) -> dict:
    return json.loads(run("--json", *args))


@pytest.fixture
def scene():
    """Two live workers, one stopping, one dead (with an orphaned request), one long gone."""
    now = timezone.now()

    def ago(seconds):
        return now - timedelta(seconds=seconds)

    Worker.objects.create(id="a-1-aaaa", host="a", pid=1, started_at=ago(600), heartbeat_at=ago(2))
    Worker.objects.create(id="b-2-bbbb", host="b", pid=2, started_at=ago(500), heartbeat_at=ago(5))
    Worker.objects.create(id="c-3-cccc", host="c", pid=3, heartbeat_at=ago(1), stopping=True)
    Worker.objects.create(id="d-4-dddd", host="d", pid=4, started_at=ago(900), heartbeat_at=ago(90))
    Worker.objects.create(id="e-5-eeee", host="e", pid=5, started_at=ago(9000), heartbeat_at=ago(8000))
    live = Session.objects.create(id="s" * 32, protocol_version="2025-11-25")
    gone = Session.objects.create(id="t" * 32, protocol_version="2025-11-25", terminated_at=ago(10))

    def stream(**fields):
        fields.setdefault("session", live)
        fields.setdefault("method", "tools/call")
        return Stream.objects.create(**fields)

    streams = {
        # On a: one call connected there, one whose client is away, one resumed onto b.
        "a_connected": stream(tool_name="progress", request_id="1", worker="a-1-aaaa",
                              connected_worker="a-1-aaaa", lease_expires_at=now + timedelta(seconds=25), last_seq=7),
        "a_away": stream(tool_name="slow", request_id="2", worker="a-1-aaaa",
                         lease_expires_at=now + timedelta(seconds=20)),
        "a_on_b": stream(tool_name="progress", request_id="3", worker="a-1-aaaa", connected_worker="b-2-bbbb",
                         lease_expires_at=now + timedelta(seconds=28), reconnects=2),
        # b holds the session's GET stream.
        "get_on_b": stream(kind=Stream.Kind.STANDALONE, method="", worker="a-1-aaaa", connected_worker="b-2-bbbb"),
        # d died: its request's lease ran out, the row still says it is connected there.
        "d_orphan": stream(tool_name="progress", request_id="4", worker="d-4-dddd", connected_worker="d-4-dddd",
                           lease_expires_at=ago(60)),
        # Finished: replayable within the retention; not counted anywhere once past it.
        "done": stream(request_id="5", worker="b-2-bbbb", status=Stream.Status.COMPLETED, finished_at=ago(5),
                       connected_worker="b-2-bbbb"),
        "old": stream(request_id="6", worker="b-2-bbbb", status=Stream.Status.COMPLETED, finished_at=ago(7200)),
        # An open stream of a terminated session is not resumable.
        "dead_session": stream(session=gone, request_id="7", worker="b-2-bbbb",
                               lease_expires_at=now + timedelta(seconds=10)),
    }
    return streams


@override_settings(MCP_TRANSPORT=LEASE)
def test_json_reports_workers_leases_and_streams(scene):
    report = status()
    workers = {w["id"]: w for w in report["workers"]}
    assert report["lease_seconds"] == 30
    assert [w["id"] for w in report["workers"]] == ["a-1-aaaa", "b-2-bbbb", "c-3-cccc", "d-4-dddd"]
    assert report["workers_hidden"] == 1  # e: stale with nothing left on it

    a, b, c, d = (workers[k] for k in ("a-1-aaaa", "b-2-bbbb", "c-3-cccc", "d-4-dddd"))
    assert (a["state"], b["state"], c["state"], d["state"]) == ("alive", "alive", "stopping", "stale")
    assert (a["host"], a["pid"]) == ("a", 1)
    assert 1 <= a["heartbeat_age_seconds"] < 30 and d["heartbeat_age_seconds"] >= 89

    assert a["requests_in_flight"] == 3 and a["leases"]["expired"] == 0
    assert a["leases"]["earliest_expiry"] == scene["a_away"].lease_expires_at.isoformat()
    assert a["leases"]["latest_expiry"] == scene["a_on_b"].lease_expires_at.isoformat()
    assert a["streams_connected"] == {"request": 1, "standalone": 0}
    assert a["streams_resumable"] == 1
    assert [r["stream"] for r in a["requests"]] == [scene[k].pk for k in ("a_away", "a_connected", "a_on_b")]
    first = a["requests"][0]
    assert (first["tool"], first["request_id"], first["connected_worker"]) == ("slow", "2", "")
    assert 15 < first["lease_remaining_seconds"] <= 20
    assert a["requests"][1]["events"] == 7 and a["requests"][2]["reconnects"] == 2

    assert b["requests_in_flight"] == 1  # the terminated session's stream, still open in the table
    assert b["streams_connected"] == {"request": 1, "standalone": 1}
    assert b["streams_resumable"] == 0

    assert d["requests_in_flight"] == 1 and d["leases"]["expired"] == 1
    assert d["streams_connected"] == {"request": 1, "standalone": 0}  # as the row says: that connection is gone
    assert d["streams_resumable"] == 1
    assert d["requests"][0]["lease_remaining_seconds"] < -59

    assert report["sessions_active"] == 1
    assert report["streams"] == {
        "open": 6, "connected": 3, "resumable": 2, "orphaned": 1, "held_by_gone_workers": 1,
        "replayable_finished": 1,
    }


@override_settings(MCP_TRANSPORT=LEASE)
def test_all_shows_stale_workers_with_nothing_on_them(scene):
    report = status("--all")
    assert report["workers_hidden"] == 0
    e = report["workers"][-1]
    assert (e["id"], e["state"], e["requests_in_flight"]) == ("e-5-eeee", "stale", 0)


@override_settings(MCP_TRANSPORT={"LEASE_SECONDS": 3})
def test_staleness_follows_lease_seconds(scene):
    states = {w["id"]: w["state"] for w in status()["workers"]}
    assert states["a-1-aaaa"] == "alive" and states["b-2-bbbb"] == "stale"


@override_settings(MCP_TRANSPORT=LEASE)
def test_limit_caps_the_listed_requests_not_the_counts(scene):
    a = {w["id"]: w for w in status("--limit", "1")["workers"]}["a-1-aaaa"]
    assert a["requests_in_flight"] == 3 and len(a["requests"]) == 1


@override_settings(MCP_TRANSPORT=LEASE)
def test_a_worker_known_only_from_its_streams_is_listed_as_unknown(scene):
    Stream.objects.create(session=Session.objects.get(pk="s" * 32), request_id="8", worker="x-9-gone",
                          lease_expires_at=timezone.now() + timedelta(seconds=5))
    x = {w["id"]: w for w in status()["workers"]}["x-9-gone"]
    assert (x["state"], x["host"], x["pid"], x["requests_in_flight"]) == ("unknown", "", None, 1)


@override_settings(MCP_TRANSPORT=LEASE)
def test_table(scene):
    text = run()
    lines = text.splitlines()
    assert "LEASE_SECONDS (30s)" in lines[0]
    header = next(line for line in lines if line.startswith("WORKER"))
    for column in ("HOST", "PID", "HEARTBEAT", "STATE", "IN FLIGHT", "LEASES", "CONNECTED", "RESUMABLE"):
        assert column in header
    row = {line.split()[0]: line for line in lines if line.split()[:1] and line.split()[0].endswith(("aaaa", "dddd"))}
    assert "alive" in row["a-1-aaaa"] and "next in" in row["a-1-aaaa"]
    assert "stale" in row["d-4-dddd"] and "1 expired" in row["d-4-dddd"]
    assert "not shown: 1 stale worker(s) with nothing left on them" in text
    assert "Streams open: 6 (connected 3, resumable 2); finished and still replayable: 1." in text
    assert "lease expired" in text and ": 1." in text
    assert "In-flight requests:" in text and "(client away)" in text and "slow" in text


def test_empty():
    text = run()
    assert "No workers (a worker appears with its first request)." in text
    assert "Streams open: 0 (connected 0, resumable 0)" in text
    report = status()
    assert (report["workers"], report["workers_hidden"], report["sessions_active"]) == ([], 0, 0)
    assert set(report["streams"].values()) == {0}

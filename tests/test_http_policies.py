"""SEP-1699 connection control through real HTTP: disconnect policies, `retry`, keepalives,
tool-initiated closes, and the polling loop a client runs on top of them.

Each policy runs in its own daphne (started once per module for the policy) with a small
RETRY_MS, which the polling client honours before every reconnect.
"""
import time

import pytest

from .http_support import (  # noqa: F401  (fixtures)
    client_response, is_priming, mcp, module_daphne, no_server_errors, open_call, open_sse, progress_values,
    resume, resume_all, responses_to, run_call, statuses, twin,
)

RETRY = 50
WATCHED = "test://watched-resource"


# Pure polling without the grace: every connection closes right after what is there.
after_priming = module_daphne({"DISCONNECT_POLICY": "after_priming", "AFTER_PRIMING_GRACE_SECONDS": 0,
                               "RETRY_MS": RETRY, "KEEPALIVE_SECONDS": 0.1})
after_priming_grace = module_daphne({"DISCONNECT_POLICY": "after_priming", "RETRY_MS": 5000})
after_seconds = module_daphne({"DISCONNECT_POLICY": "after_seconds", "DISCONNECT_AFTER_SECONDS": 0.3,
                               "RETRY_MS": RETRY})
idle = module_daphne({"DISCONNECT_POLICY": "idle", "DISCONNECT_AFTER_SECONDS": 0.3, "RETRY_MS": RETRY})
keepalive = module_daphne({"KEEPALIVE_SECONDS": 0.1})


def poll(client, last_id, request_id=None, *, retry_ms=RETRY, until=None, limit=300):
    """The client's polling loop: wait `retry`, GET + Last-Event-ID, until the response (or `until`)."""
    connections = []
    while True:
        time.sleep(retry_ms / 1000)
        reader = resume_all(client, last_id)
        connections.append(reader)
        assert reader.status == 200, reader.json()
        # A resumed connection carries an event id at once (replay or re-priming).
        assert reader.events and reader.events[0].id is not None
        if request_id is not None and responses_to(reader.messages, request_id):
            return connections
        if until is not None and until(reader):
            return connections
        assert reader.closed and reader.retry == retry_ms  # closed early, with `retry` first
        last_id = reader.last_id
        assert len(connections) < limit, "the stream never completed"


def all_messages(*readers):
    return [m for r in readers for m in r.messages]


# after_priming: pure polling


def test_after_priming_closes_the_post_connection_right_after_priming(after_priming, mcp):
    client = mcp(after_priming)
    client.initialize()
    request_id, first = run_call(client, "progress", {"count": 3, "delay": 0.02}, progress_token="a")
    assert first.status == 200
    assert len(first.events) == 1 and is_priming(first.events[0])
    assert first.events[0].retry == RETRY
    assert first.blocks[-1].kind == "retry" and first.blocks[-1].retry == RETRY
    assert first.messages == [] and first.closed
    rest = poll(client, first.last_id, request_id)
    messages = all_messages(*rest)
    assert progress_values(messages) == [1, 2, 3]
    assert responses_to(messages, request_id)[0]["result"]["content"][0]["text"] == "done 3"


def test_after_priming_waits_a_moment_for_a_quick_tool_before_closing(after_priming_grace, mcp):
    """The grace (AFTER_PRIMING_GRACE_SECONDS): a sync tool that answers in a few ms answers on the
    first connection, not after a 5 s retry and a reconnect."""
    client = mcp(after_priming_grace)
    client.initialize()
    request_id, first = run_call(client, "test_simple_text", {})
    assert responses_to(first.messages, request_id)[0]["result"]["content"][0]["text"].startswith("This is")
    request_id, slow = run_call(client, "progress", {"count": 2, "delay": 0.5}, progress_token="s")
    assert slow.messages == [] and slow.retry == 5000  # not ready within the grace: closed as before


def test_after_priming_pure_polling_loop_delivers_every_event_exactly_once(after_priming, mcp):
    client = mcp(after_priming)
    client.initialize()
    request_id, first = run_call(client, "progress", {"count": 20, "delay": 0.02}, progress_token="poll")
    assert first.messages == [] and first.retry == RETRY
    rest = poll(client, first.last_id, request_id)
    messages = all_messages(first, *rest)
    assert progress_values(messages) == list(range(1, 21))
    assert len(responses_to(messages, request_id)) == 1
    assert messages[-1]["result"]["content"][0]["text"] == "done 20"
    assert len(rest) >= 2  # it really polled
    ids = [e.id for r in (first, *rest) for e in r.events if e.data]
    assert len(ids) == len(set(ids))


def test_after_priming_applies_to_the_standalone_get_stream(after_priming, mcp):
    client = mcp(after_priming)
    client.initialize()
    client.request("resources/subscribe", {"uri": WATCHED})
    with open_sse(client, "GET") as get:
        get.read_all()
    assert len(get.events) == 1 and is_priming(get.events[0]) and get.retry == RETRY and get.closed
    run_call(client, "update_resource", {})
    rest = poll(client, get.last_id, until=lambda r: any(m.get("method") == "notifications/resources/updated"
                                                         for m in r.messages))
    assert rest[-1].messages == [{"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                  "params": {"uri": WATCHED}}]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_after_priming_never_closes_an_older_sessions_connection(after_priming, mcp, version):
    client = mcp(after_priming)
    client.initialize(version=version)
    request_id, reader = run_call(client, "progress", {"count": 5, "delay": 0.02}, progress_token="old")
    assert all(e.data for e in reader.events)  # no priming
    assert progress_values(reader.messages) == [1, 2, 3, 4, 5]
    assert responses_to(reader.messages, request_id)[0]["result"]["content"][0]["text"] == "done 5"
    assert [b for b in reader.blocks if b.kind == "retry"] == []
    # The standalone GET stream stays open too: keepalives, not a close.
    with open_sse(client, "GET") as get:
        blocks = [get.next_block() for _ in range(3)]
    assert all(b is not None and b.kind == "comment" for b in blocks)
    assert "keepalive" in [b.comment for b in blocks]
    assert get.events == []


# after_seconds and idle


def test_after_seconds_closes_a_busy_connection_and_polling_completes(after_seconds, mcp):
    client = mcp(after_seconds)
    client.initialize()
    request_id, first = run_call(client, "progress", {"count": 40, "delay": 0.02}, progress_token="s")
    assert is_priming(first.events[0])
    assert first.closed and first.retry == RETRY and first.blocks[-1].kind == "retry"
    assert responses_to(first.messages, request_id) == []  # closed while the tool was still going
    rest = poll(client, first.last_id, request_id)
    messages = all_messages(first, *rest)
    assert progress_values(messages) == list(range(1, 41))
    assert len(responses_to(messages, request_id)) == 1


def test_after_seconds_leaves_a_short_call_alone(after_seconds, mcp):
    client = mcp(after_seconds)
    client.initialize()
    request_id, reader = run_call(client, "progress", {"count": 3, "delay": 0}, progress_token="q")
    assert responses_to(reader.messages, request_id)
    assert [b for b in reader.blocks if b.kind == "retry"] == []


def test_idle_closes_a_quiet_connection_and_the_answer_comes_on_resume(idle, mcp):
    client = mcp(idle)
    client.initialize(capabilities={"elicitation": {}})
    request_id, cm = open_call(client, "test_elicitation", {"message": "?"})
    with cm as reader:
        ask = reader.read_until(lambda m: m.get("method") == "elicitation/create")
        reader.read_all()  # nothing happens while the client thinks: the server closes
    assert reader.closed and reader.retry == RETRY and reader.blocks[-1].kind == "retry"
    assert responses_to(reader.messages, request_id) == []
    assert client.post(client_response(ask["id"], {"action": "decline"})).status_code == 202
    rest = poll(client, reader.last_id, request_id)
    text = responses_to(all_messages(*rest), request_id)[0]["result"]["content"][0]["text"]
    assert "action=decline" in text


def test_idle_keeps_a_busy_connection_open(idle, mcp):
    client = mcp(idle)
    client.initialize()
    request_id, reader = run_call(client, "progress", {"count": 25, "delay": 0.02}, progress_token="busy")
    assert progress_values(reader.messages) == list(range(1, 26))
    assert responses_to(reader.messages, request_id)
    assert [b for b in reader.blocks if b.kind == "retry"] == []


def test_idle_closes_a_quiet_standalone_get_stream_which_resumes(idle, mcp):
    client = mcp(idle)
    client.initialize()
    with open_sse(client, "GET") as get:
        get.read_all()
    assert is_priming(get.events[0]) and get.closed and get.retry == RETRY
    with resume(client, get.last_id) as again:
        first = again.next_event()
        assert first.id == get.last_id and first.data == ""  # re-primed at once


# never (the default) and keepalives


def test_never_keeps_the_connection_for_the_whole_call(mcp):
    client = mcp()
    client.initialize()
    request_id, reader = run_call(client, "progress", {"count": 10, "delay": 0.03}, progress_token="n")
    assert progress_values(reader.messages) == list(range(1, 11))
    assert responses_to(reader.messages, request_id)
    assert [b for b in reader.blocks if b.kind == "retry"] == []


def test_keepalive_comments_on_a_quiet_get_stream(keepalive, mcp):
    client = mcp(keepalive)
    client.initialize()
    with open_sse(client, "GET") as get:
        assert is_priming(get.next_event())
        block = get.next_block()
        assert block.kind == "comment" and block.comment == "keepalive"
        assert get.next_block().kind == "comment"  # and again, the connection stays


def test_keepalive_comments_on_a_quiet_post_stream_then_the_result(keepalive, mcp):
    client = mcp(keepalive)
    client.initialize(capabilities={"elicitation": {}})
    request_id, cm = open_call(client, "test_elicitation", {"message": "?"})
    with cm as reader:
        ask = reader.read_until(lambda m: m.get("method") == "elicitation/create")
        block = reader.next_block()
        assert block.kind == "comment" and block.comment == "keepalive"
        other = twin(lambda: mcp(keepalive), client)
        assert other.post(client_response(ask["id"], {"action": "accept", "content": {}})).status_code == 202
        reader.read_all()
    assert "action=accept" in responses_to(reader.messages, request_id)[0]["result"]["content"][0]["text"]


# Tool-initiated close (ctx.close_sse_stream)


def test_reconnection_tool_closes_after_priming_and_the_result_comes_on_resume(mcp):
    client = mcp()
    client.initialize()
    request_id, first = run_call(client, "test_reconnection", {})
    assert is_priming(first.events[0]) and first.events[0].retry == 1000
    assert first.messages == [] and first.closed
    assert first.blocks[-1].kind == "retry" and first.blocks[-1].retry == 200
    time.sleep(0.2)  # the client waits the announced retry
    resumed = resume_all(client, first.last_id)
    assert resumed.events[0].id is not None
    assert responses_to(resumed.messages, request_id)[0]["result"]["content"][0]["text"] == \
        "Reconnection test completed successfully"
    assert resumed.closed


def test_reconnection_tool_resumed_after_the_result_replays_it(mcp):
    client = mcp()
    client.initialize()
    request_id, first = run_call(client, "test_reconnection", {})
    other = twin(mcp, client)
    with resume(other, first.last_id) as live:  # resumed while the tool still sleeps: live delivery
        live.read_all()
    replay = resume_all(client, first.last_id)
    assert [(e.id, e.data) for e in replay.events] == [(e.id, e.data) for e in live.events if e.data]
    assert responses_to(replay.messages, request_id)


@pytest.mark.parametrize("version", ["2025-06-18"])
def test_reconnection_tool_never_closes_an_older_sessions_connection(mcp, version):
    client = mcp()
    client.initialize(version=version)
    request_id, reader = run_call(client, "test_reconnection", {})
    assert responses_to(reader.messages, request_id), [b for b in reader.blocks]

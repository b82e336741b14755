"""SSE streams through real HTTP against daphne: priming, event ids, resumption, cancellation,
the standalone GET stream, server-to-client requests, DELETE during a call.

Connections are read incrementally (`http_support.SSEReader`), so a test reads a few events,
posts on another connection (a second client sharing the session), then reads on.
"""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from mcp_transport.testing import parse_events

from .http_support import (  # noqa: F401  (fixtures)
    ACCEPT_BOTH, PROGRESS, call_message, client_response, db, is_priming, mcp, no_server_errors, open_call, open_sse, parse_id,
    progress_values, resume, resume_all, responses_to, rpc, run_call, server, statuses, stream_status, twin,
    wait_for,
)

UPDATED = "notifications/resources/updated"
WATCHED = "test://watched-resource"


def standalone_events(server, session_id) -> int:
    """How many events the session's standalone GET stream holds, priming included."""
    rows = db(server, "SELECT COUNT(*) FROM mcp_transport_event e JOIN mcp_transport_stream s ON e.stream_id = s.id "
                      "WHERE s.session_id = ? AND s.kind = 'standalone'", (session_id,))
    return rows[0][0]


@pytest.fixture
def c(mcp):
    client = mcp()
    client.initialize()
    return client


# Headers, priming, event ids


def test_post_stream_has_sse_headers_priming_then_messages_then_ends(c):
    request_id, reader = run_call(c, "progress", {"count": 3, "delay": 0.01}, progress_token="tok")
    assert reader.status == 200
    assert reader.headers["content-type"].startswith("text/event-stream")
    assert reader.headers["cache-control"] == "no-cache"
    assert reader.headers["x-accel-buffering"] == "no"
    assert reader.headers["mcp-session-id"] == c.session_id
    first = reader.events[0]
    assert is_priming(first) and first.retry == 1000
    assert [e for e in reader.events[1:] if not e.data] == []  # only one priming event
    assert all(e.id for e in reader.events)  # every event is resumable
    assert progress_values(reader.messages, "tok") == [1, 2, 3]
    assert reader.messages[-1] == {"jsonrpc": "2.0", "id": request_id,
                                   "result": {"content": [{"type": "text", "text": "done 3"}]}}
    assert reader.closed  # the server ended the response after the result


def test_a_quick_response_goes_out_with_its_priming_event_as_one_body(c, example_server):
    """The response was stored with the stream: priming and result in one write, with a length."""
    request_id = c.next_id()
    response = c.http.post(c.url, content=json.dumps(call_message(request_id, "echo", {"message": "hi"})),
                           headers=c.headers(None, accept=ACCEPT_BOTH))
    assert response.headers["content-type"].startswith("text/event-stream")
    assert int(response.headers["content-length"]) == len(response.content)
    assert "x-accel-buffering" not in response.headers  # nothing left to stream
    events = parse_events(response.text)
    assert [is_priming(e) for e in events] == [True, False]
    assert json.loads(events[1].data) == {"jsonrpc": "2.0", "id": request_id,
                                          "result": {"content": [{"type": "text", "text": "hi"}]}}
    stream_id, seq = parse_id(events[1].id)
    assert seq == 1 and stream_status(example_server, stream_id) == "completed"


@pytest.mark.parametrize("header", ["2025-11-25", "2025-06-18", "2025-03-26", None])
def test_priming_follows_the_sessions_version_not_the_request_header(mcp, header):
    client = mcp()
    client.initialize(version="2025-11-25")
    headers = {"MCP-Protocol-Version": header} if header else {}
    without = () if header else ("MCP-Protocol-Version",)
    request_id, cm = open_call(client, "echo", {"message": "hi"}, headers=headers, without=without)
    with cm as reader:
        reader.read_all()
    assert reader.status == 200
    assert is_priming(reader.events[0])
    assert responses_to(reader.messages, request_id)[0]["result"]["content"][0]["text"] == "hi"


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
@pytest.mark.parametrize("header", ["2025-11-25", "own"])
def test_no_priming_for_sessions_older_than_2025_11_25(mcp, version, header):
    client = mcp()
    client.initialize(version=version)
    headers = {"MCP-Protocol-Version": "2025-11-25"} if header == "2025-11-25" else {}
    request_id, cm = open_call(client, "progress", {"count": 2, "delay": 0}, progress_token=1, headers=headers)
    with cm as reader:
        reader.read_all()
    assert reader.status == 200
    assert reader.events and all(e.data for e in reader.events)  # never an empty-data event
    assert progress_values(reader.messages) == [1, 2]
    assert responses_to(reader.messages, request_id)


@pytest.mark.parametrize("method,params", [
    ("prompts/get", {"name": "test_simple_prompt"}),
    ("resources/read", {"uri": "test://static-text"}),
    ("tools/call", {"name": "test_simple_text", "arguments": {}}),
])
def test_every_streamed_method_is_primed(c, method, params):
    reader, message = rpc(c, method, params)
    assert reader.is_sse
    assert is_priming(reader.events[0])
    assert "result" in message


def test_non_streamed_methods_answer_plain_json(c):
    reader, message = rpc(c, "tools/list", {})
    assert not reader.is_sse
    assert reader.headers["content-type"].startswith("application/json")
    assert reader.headers["mcp-session-id"] == c.session_id
    assert message["result"]["tools"]


def test_event_ids_are_unique_in_the_session_and_ordered_within_each_stream(c, mcp):
    ids = []
    streams = []
    for _ in range(3):
        _, reader = run_call(c, "progress", {"count": 4, "delay": 0}, progress_token="p")
        stream_ids = [e.id for e in reader.events]
        streams.append(stream_ids)
        ids += stream_ids
    c.request("resources/subscribe", {"uri": WATCHED})
    with open_sse(c, "GET") as get:
        ids.append(get.next_event().id)
        run_call(c, "update_resource", {})
        ids.append(get.next_event().id)
    assert len(ids) == len(set(ids)), ids
    for stream_ids in streams:
        parsed = [parse_id(i) for i in stream_ids]
        assert len({s for s, _ in parsed}) == 1  # one stream per request
        seqs = [q for _, q in parsed]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert len({parse_id(s[0])[0] for s in streams}) == 3  # three different streams
    # Another session's ids never collide with these.
    other = mcp()
    other.initialize()
    _, reader = run_call(other, "progress", {"count": 2, "delay": 0}, progress_token="p")
    assert not set(e.id for e in reader.events) & set(ids)


def test_unicode_and_line_breaks_survive_the_sse_framing(c):
    text = "caf\u00e9 \u2713 \u65e5\u672c \U0001f600 line\nbreak\r\nCR\rLS\u2028PS\u2029NEL\u0085 tab\t end"
    request_id, reader = run_call(c, "echo", {"message": text})
    assert responses_to(reader.messages, request_id)[0]["result"]["content"][0]["text"] == text
    replay = resume_all(c, reader.events[0].id)
    assert responses_to(replay.messages, request_id)[0]["result"]["content"][0]["text"] == text


def test_concurrent_calls_each_get_only_their_own_messages(c, mcp):
    clients = [twin(mcp, c) for _ in range(5)]

    def call(i):
        return run_call(clients[i], "progress", {"count": 6, "delay": 0.01}, progress_token=f"tok-{i}",
                        request_id=f"req-{i}")

    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(call, range(5)))
    seen_ids = set()
    for i, (request_id, reader) in enumerate(results):
        tokens = {m["params"]["progressToken"] for m in reader.messages if m.get("method") == PROGRESS}
        assert tokens == {f"tok-{i}"}
        assert progress_values(reader.messages) == [1, 2, 3, 4, 5, 6]
        assert [m["id"] for m in reader.messages if "method" not in m] == [f"req-{i}"]
        ids = {e.id for e in reader.events}
        assert not ids & seen_ids  # no event on two streams
        seen_ids |= ids


def test_log_messages_go_on_the_calls_stream_and_follow_set_level(c):
    request_id, reader = run_call(c, "test_tool_with_logging", {})
    logs = [m for m in reader.messages if m.get("method") == "notifications/message"]
    assert [m["params"]["data"] for m in logs] == [
        "Tool execution started", "Tool processing data", "Tool execution completed"]
    assert all(m["params"]["level"] == "info" for m in logs)
    assert c.request("logging/setLevel", {"level": "warning"})["result"] == {}
    request_id, reader = run_call(c, "test_tool_with_logging", {})
    assert [m for m in reader.messages if m.get("method") == "notifications/message"] == []
    assert responses_to(reader.messages, request_id)


# Resumption


def test_resume_from_the_middle_replays_exactly_what_followed(c):
    request_id, reader = run_call(c, "progress", {"count": 10, "delay": 0}, progress_token="m")
    original = [(e.id, e.data) for e in reader.events]
    middle = 5
    resumed = resume_all(c, original[middle][0])
    assert resumed.status == 200
    assert resumed.headers["content-type"].startswith("text/event-stream")
    assert [(e.id, e.data) for e in resumed.events] == original[middle + 1:]
    assert resumed.closed
    assert responses_to(resumed.messages, request_id)[0]["result"]["content"][0]["text"] == "done 10"


def test_resume_after_the_call_finished_replays_everything_and_ends(c):
    request_id, reader = run_call(c, "progress", {"count": 5, "delay": 0}, progress_token="f")
    resumed = resume_all(c, reader.events[0].id)  # from the priming event
    assert [(e.id, e.data) for e in resumed.events] == [(e.id, e.data) for e in reader.events[1:]]
    assert progress_values(resumed.messages) == [1, 2, 3, 4, 5]
    assert len(responses_to(resumed.messages, request_id)) == 1
    assert resumed.closed


def test_resume_from_the_final_event_sends_nothing_new_and_ends(c):
    _, reader = run_call(c, "echo", {"message": "x"})
    resumed = resume_all(c, reader.last_id)
    assert resumed.status == 200
    assert resumed.messages == []
    assert resumed.closed


def test_resume_while_the_tool_is_still_emitting_has_no_gap_and_no_duplicate(c):
    def fifth_progress(event):
        return event.data and event.message.get("method") == PROGRESS and event.message["params"]["progress"] >= 5

    # tests.live.MCPClient: `stop` cuts the client's connection after ~5 progress events...
    request_id, first = c.call_tool("progress", {"count": 30, "delay": 0.02}, progress_token="live",
                                    stop=fifth_progress, read_timeout=10)
    assert not first.closed_by_server
    assert progress_values(first.messages) == [1, 2, 3, 4, 5]
    # ...and it resumes at once, while the tool is still emitting.
    with resume(c, first.last_id) as second:
        second.read_all()
    assert second.status == 200
    assert is_priming(first.events[0])
    combined = first.messages + second.messages
    assert progress_values(combined) == list(range(1, 31))
    assert len(responses_to(combined, request_id)) == 1
    assert combined[-1]["result"]["content"][0]["text"] == "done 30"
    ids = [e.id for e in first.events + second.events if e.data]
    assert len(ids) == len(set(ids))
    assert [parse_id(i)[1] for i in ids] == sorted(parse_id(i)[1] for i in ids)


def test_a_resume_replaces_the_connection_still_open_on_that_stream(c, mcp):
    other = twin(mcp, c)
    request_id, cm = open_call(c, "progress", {"count": 30, "delay": 0.02}, progress_token="r")
    with cm as first:
        first.read_until(lambda m: m.get("method") == PROGRESS and m["params"]["progress"] >= 3)
        mark = first.last_id
        with resume(other, mark) as second:
            second.read_all()
        first.read_all()  # the server ended the old connection
    assert first.closed
    assert responses_to(first.messages, request_id) == []
    assert first.retry is not None  # told when to come back before the close
    seen = [m for m in first.messages]
    assert progress_values(seen + second.messages)[-1] == 30
    after_mark = progress_values(second.messages)
    assert after_mark == list(range(after_mark[0], 31)) and after_mark[0] <= 4
    assert len(responses_to(second.messages, request_id)) == 1


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_older_sessions_can_resume_from_a_message_event_id(mcp, version):
    client = mcp()
    client.initialize(version=version)
    request_id, cm = open_call(client, "progress", {"count": 12, "delay": 0.02}, progress_token="o")
    with cm as first:
        first.read_until(lambda m: m.get("method") == PROGRESS and m["params"]["progress"] >= 3)
    with resume(client, first.last_id) as second:
        second.read_all()
    combined = first.messages + second.messages
    assert progress_values(combined) == list(range(1, 13))
    assert len(responses_to(combined, request_id)) == 1
    assert all(e.data for e in first.events + second.events)  # still never an empty-data event


def test_finished_streams_are_replayable_only_within_event_retention(server, mcp):
    s = server({"EVENT_RETENTION_SECONDS": 0.001})
    client = mcp(s)
    client.initialize()
    request_id, cm = open_call(client, "progress", {"count": 20, "delay": 0.02}, progress_token="t")
    with cm as first:
        first.read_until(lambda m: m.get("method") == PROGRESS)
    with resume(client, first.last_id) as second:  # still open: resumable
        second.read_all()
    assert second.status == 200 and responses_to(second.messages, request_id)
    response = client.http.get(client.url, headers=client.headers({"Last-Event-ID": first.last_id},
                                                                   accept="text/event-stream"))
    assert response.status_code == 400  # finished, and past its (1 ms) retention


def test_resuming_another_sessions_stream_is_400_and_leaks_nothing(c, mcp):
    request_id, reader = run_call(c, "echo", {"message": "secret-of-session-a"})
    with open_sse(c, "GET") as get:
        standalone_id = get.next_event().id
    intruder = mcp()
    intruder.initialize()
    for event_id in (reader.events[0].id, reader.last_id, standalone_id):
        response = intruder.http.get(intruder.url, headers=intruder.headers(
            {"Last-Event-ID": event_id}, accept="text/event-stream"))
        assert response.status_code == 400, response.text
        assert "secret-of-session-a" not in response.text
        assert "error" in response.json() and "result" not in response.json()


@pytest.mark.parametrize("last_event_id", ["garbage", "12", "-1", "1-", "-", "a-b", "1-2-3", "1_2", "1-x",
                                           "9" * 50 + "-1", "\u0661-\u0661"])
def test_malformed_last_event_id_is_400(c, last_event_id):
    hdrs = c.headers({"Last-Event-ID": last_event_id.encode("utf-8")}, accept="text/event-stream")
    response = c.http.get(c.url, headers=hdrs)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == -32600


def test_last_event_id_beyond_the_streams_end_or_of_no_stream_is_400_and_keeps_the_session(c):
    """404 would tell the client its session is gone (and make it initialize again): the session is
    fine, the event id is not."""
    _, reader = run_call(c, "echo", {"message": "x"})
    stream, seq = parse_id(reader.last_id)
    for event_id in (f"{stream}-{seq + 1}", f"{stream}-{seq + 1000}", f"{stream + 100000}-0"):
        response = c.http.get(c.url, headers=c.headers({"Last-Event-ID": event_id}, accept="text/event-stream"))
        assert response.status_code == 400, (event_id, response.text)
        assert "Last-Event-ID" in response.json()["error"]["message"]
    assert c.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 200


def test_a_disconnect_is_not_a_cancellation(c, example_server):
    request_id, cm = open_call(c, "progress", {"count": 10, "delay": 0.02}, progress_token="d")
    with cm as reader:
        priming = reader.next_event()
    assert is_priming(priming)
    stream_id = parse_id(priming.id)[0]
    # Nobody is connected; the tool runs to completion and its result is stored.
    wait_for(lambda: stream_status(example_server, stream_id) != "open")
    assert stream_status(example_server, stream_id) == "completed"
    resumed = resume_all(c, priming.id)
    assert progress_values(resumed.messages) == list(range(1, 11))
    assert responses_to(resumed.messages, request_id)[0]["result"]["content"][0]["text"] == "done 10"


@pytest.mark.parametrize("request_id", [424242, "call-abc"])
def test_notifications_cancelled_cancels_the_call(c, mcp, example_server, request_id):
    other = twin(mcp, c)
    _, cm = open_call(c, "progress", {"count": 500, "delay": 0.02}, progress_token="x", request_id=request_id)
    with cm as reader:
        priming = reader.next_event()
        reader.read_until(lambda m: m.get("method") == PROGRESS and m["params"]["progress"] >= 3)
        other.notify("notifications/cancelled", {"requestId": request_id, "reason": "user pressed stop"})
        reader.read_all()
    assert reader.closed  # the stream ended...
    assert responses_to(reader.messages, request_id) == []  # ...without a response
    assert len(progress_values(reader.messages)) < 500
    stream_id = parse_id(priming.id)[0]
    assert stream_status(example_server, stream_id) == "cancelled"
    replay = resume_all(c, priming.id)
    assert replay.status == 200 and replay.closed
    assert responses_to(replay.messages, request_id) == []
    assert progress_values(replay.messages) == progress_values(reader.messages)
    assert c.request("ping")["result"] == {}  # the session goes on


def test_cancelling_an_unknown_or_finished_request_is_harmless(c):
    request_id, _ = run_call(c, "echo", {"message": "x"})
    c.notify("notifications/cancelled", {"requestId": request_id})
    c.notify("notifications/cancelled", {"requestId": "never-sent"})
    c.notify("notifications/cancelled", {})
    _, reader = run_call(c, "echo", {"message": "still fine"})
    assert reader.messages[-1]["result"]["content"][0]["text"] == "still fine"


def test_cancelling_from_another_session_does_nothing(c, mcp):
    intruder = mcp()
    intruder.initialize()
    request_id, cm = open_call(c, "progress", {"count": 15, "delay": 0.02}, progress_token="y")
    with cm as reader:
        reader.read_until(lambda m: m.get("method") == PROGRESS)
        intruder.notify("notifications/cancelled", {"requestId": request_id})
        reader.read_all()
    assert responses_to(reader.messages, request_id)[0]["result"]["content"][0]["text"] == "done 15"


# The standalone GET stream


def test_standalone_get_is_primed_for_2025_11_25_and_a_second_one_is_409(c, mcp):
    with open_sse(c, "GET") as get:
        assert get.status == 200
        assert get.headers["content-type"].startswith("text/event-stream")
        assert get.headers["cache-control"] == "no-cache"
        assert get.headers["x-accel-buffering"] == "no"
        assert is_priming(get.next_event())
        with open_sse(twin(mcp, c), "GET", timeout=3) as second:
            assert second.status == 409
            assert second.json()["error"]["code"] == -32600


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_standalone_get_is_not_primed_for_older_sessions(mcp, version):
    client = mcp()
    client.initialize(version=version)
    with open_sse(client, "GET") as get:
        assert get.status == 200
        block = get.next_block()
        assert block.kind == "comment"  # something to flush the headers, but no empty-data event
        assert get.events == []


def test_resource_update_goes_to_the_get_stream_not_the_post_stream(c, mcp, example_server):
    bystander = mcp()
    bystander.initialize()
    with open_sse(bystander, "GET") as other_get:  # it has a GET stream too, but no subscription
        assert is_priming(other_get.next_event())
    assert standalone_events(example_server, bystander.session_id) == 1
    assert c.request("resources/subscribe", {"uri": WATCHED})["result"] == {}
    with open_sse(c, "GET") as get:
        assert is_priming(get.next_event())
        request_id, post = run_call(c, "update_resource", {})
        assert responses_to(post.messages, request_id)[0]["result"]["content"][0]["text"] == f"updated {WATCHED}"
        assert [m for m in post.messages if m.get("method") == UPDATED] == []
        message = get.next_message()
        assert message == {"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": WATCHED}}
    # Not subscribed: nothing stored for the bystander (its priming event only).
    assert standalone_events(example_server, bystander.session_id) == 1


def test_get_stream_is_resumable_with_last_event_id(c):
    c.request("resources/subscribe", {"uri": WATCHED})
    with open_sse(c, "GET") as get:
        primed = get.next_event()
    assert is_priming(primed)
    # Disconnected: the update is stored on the GET stream meanwhile.
    run_call(c, "update_resource", {})
    with resume(c, primed.id) as again:
        message = again.next_message()
        assert message["method"] == UPDATED and message["params"]["uri"] == WATCHED
        mark = again.last_id
        run_call(c, "update_resource", {})  # and it goes on live on the resumed connection
        assert again.next_message()["method"] == UPDATED
    assert parse_id(again.last_id)[0] == parse_id(primed.id)[0]
    assert parse_id(again.last_id)[1] > parse_id(mark)[1]


def test_unsubscribe_stops_updates(c, example_server):
    c.request("resources/subscribe", {"uri": WATCHED})
    with open_sse(c, "GET") as get:
        get.next_event()
    run_call(c, "update_resource", {})
    stored = standalone_events(example_server, c.session_id)
    c.request("resources/unsubscribe", {"uri": WATCHED})
    run_call(c, "update_resource", {})
    assert standalone_events(example_server, c.session_id) == stored


# Server-to-client requests on the call's stream


def test_elicitation_round_trip_on_the_tools_stream(mcp, example_server):
    client = mcp()
    client.initialize(capabilities={"elicitation": {}})
    other = twin(mcp, client)
    with open_sse(client, "GET") as get:
        get.next_event()
        request_id, cm = open_call(client, "test_elicitation", {"message": "Who are you?"})
        with cm as reader:
            ask = reader.read_until(lambda m: m.get("method") == "elicitation/create")
            assert ask is not None and "id" in ask
            assert ask["params"]["message"] == "Who are you?"
            assert ask["params"]["mode"] == "form"
            assert ask["params"]["requestedSchema"]["required"] == ["username", "email"]
            answer = client_response(ask["id"], {"action": "accept",
                                                 "content": {"username": "ada", "email": "ada@example.org"}})
            posted = other.post(answer)
            assert posted.status_code == 202 and posted.content == b""
            reader.read_all()
    final = responses_to(reader.messages, request_id)
    assert len(final) == 1
    text = final[0]["result"]["content"][0]["text"]
    assert text == 'User response: action=accept, content={"username": "ada", "email": "ada@example.org"}'
    assert reader.closed
    # The request was on the call's stream, never on the standalone GET stream.
    assert standalone_events(example_server, client.session_id) == 1


def test_sampling_round_trip_on_the_tools_stream(mcp):
    client = mcp()
    client.initialize(capabilities={"sampling": {}})
    other = twin(mcp, client)
    request_id, cm = open_call(client, "test_sampling", {"prompt": "What is 6*7?"})
    with cm as reader:
        ask = reader.read_until(lambda m: m.get("method") == "sampling/createMessage")
        assert ask["params"]["messages"][0]["content"] == {"type": "text", "text": "What is 6*7?"}
        assert ask["params"]["maxTokens"] == 100
        answer = client_response(ask["id"], {"role": "assistant", "content": {"type": "text", "text": "42"},
                                             "model": "test-model", "stopReason": "endTurn"})
        assert other.post(answer).status_code == 202
        reader.read_all()
    assert responses_to(reader.messages, request_id)[0]["result"]["content"][0]["text"] == "LLM response: 42"


def test_client_error_answer_to_elicitation_becomes_the_calls_error(mcp):
    client = mcp()
    client.initialize(capabilities={"elicitation": {}})
    other = twin(mcp, client)
    request_id, cm = open_call(client, "test_elicitation", {"message": "?"})
    with cm as reader:
        ask = reader.read_until(lambda m: m.get("method") == "elicitation/create")
        posted = other.post({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32099, "message": "declined"}})
        assert posted.status_code == 202
        reader.read_all()
    final = responses_to(reader.messages, request_id)[0]
    assert final["error"]["code"] == -32099


def test_server_request_without_the_client_capability_is_a_tool_error_not_a_request(c):
    """The client's call was valid: the tool gets ClientCapabilityError, and uncaught it is an isError result."""
    request_id, reader = run_call(c, "test_sampling", {"prompt": "x"})
    assert [m for m in reader.messages if m.get("method") == "sampling/createMessage"] == []
    final = responses_to(reader.messages, request_id)[0]
    assert final["result"]["isError"] is True and "'sampling' capability" in final["result"]["content"][0]["text"]


def test_another_sessions_answer_does_not_resolve_the_request(mcp):
    client = mcp()
    client.initialize(capabilities={"elicitation": {}})
    other = twin(mcp, client)
    intruder = mcp()
    intruder.initialize(capabilities={"elicitation": {}})
    request_id, cm = open_call(client, "test_elicitation", {"message": "?"})
    with cm as reader:
        ask = reader.read_until(lambda m: m.get("method") == "elicitation/create")
        forged = client_response(ask["id"], {"action": "accept", "content": {"username": "mallory", "email": "m@x"}})
        assert intruder.post(forged).status_code == 202  # accepted, but not this session's request
        real = client_response(ask["id"], {"action": "decline"})
        assert other.post(real).status_code == 202
        reader.read_all()
    text = responses_to(reader.messages, request_id)[0]["result"]["content"][0]["text"]
    assert "action=decline" in text and "mallory" not in text


def test_elicitation_answer_after_a_disconnect_result_is_replayable(mcp):
    """The client may lose the connection while the server waits for it; answering still completes the call."""
    client = mcp()
    client.initialize(capabilities={"elicitation": {}})
    request_id, cm = open_call(client, "test_elicitation", {"message": "?"})
    with cm as reader:
        ask = reader.read_until(lambda m: m.get("method") == "elicitation/create")
        mark = reader.last_id
    assert client.post(client_response(ask["id"], {"action": "cancel"})).status_code == 202
    resumed = resume_all(client, mark)
    assert "action=cancel" in responses_to(resumed.messages, request_id)[0]["result"]["content"][0]["text"]


# DELETE


def test_delete_during_an_inflight_call_ends_its_stream(c, mcp, example_server):
    other = twin(mcp, c)
    request_id, cm = open_call(c, "progress", {"count": 500, "delay": 0.02}, progress_token="z")
    with cm as reader:
        priming = reader.next_event()
        reader.read_until(lambda m: m.get("method") == PROGRESS and m["params"]["progress"] >= 2)
        assert other.delete().status_code == 200
        reader.read_all()
    assert reader.closed
    assert responses_to(reader.messages, request_id) == []
    assert len(progress_values(reader.messages)) < 500
    assert stream_status(example_server, parse_id(priming.id)[0]) == "cancelled"
    response = c.http.get(c.url, headers=c.headers({"Last-Event-ID": priming.id}, accept="text/event-stream"))
    assert response.status_code == 404


def test_delete_while_waiting_for_the_client_ends_the_stream(mcp):
    client = mcp()
    client.initialize(capabilities={"elicitation": {}})
    other = twin(mcp, client)
    request_id, cm = open_call(client, "test_elicitation", {"message": "?"})
    with cm as reader:
        reader.read_until(lambda m: m.get("method") == "elicitation/create")
        assert other.delete().status_code == 200
        reader.read_all()
    assert reader.closed and responses_to(reader.messages, request_id) == []


def test_delete_ends_an_open_standalone_get_stream(c, mcp):
    other = twin(mcp, c)
    with open_sse(c, "GET", timeout=2) as get:
        assert is_priming(get.next_event())
        assert other.delete().status_code == 200
        get.read_all()  # a ReadTimeout here means the server kept the stream open
    assert get.closed


def test_framing_many_events_at_once_matches_one_by_one():
    """`sse.events` (replays, bursts) frames exactly as `sse.event`, multi-line data included."""
    from mcp_transport.transport import sse

    ids = ["7-1", "7-2", "7-3", "7-4"]
    datas = ['{"a":1}', "two\nlines", "cr\rlf\r\nend", ""]
    framed = sse.events(ids, datas)
    assert framed == b"".join(sse.event(i, d) for i, d in zip(ids, datas))
    assert [(e.id, e.data) for e in parse_events(framed.decode())] == list(zip(ids, ["{\"a\":1}", "two\nlines", "cr\nlf\nend", ""]))

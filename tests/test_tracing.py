"""OpenTelemetry spans, recorded by the SDK's in-memory exporter, for requests to the example's
application (in-process, over its ASGI interface): names and attributes as the semantic
conventions for MCP have them in both eras, the parent taken from `params._meta` (the HTTP
headers' context linked) or from the headers, errors, a resumption's replay, the database
thread's batches, and nothing at all with TRACING off.
"""
from __future__ import annotations

import pytest
from django.test import override_settings
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from example_project.asgi import application
from mcp_transport import tracing
from mcp_transport.testing import MCPCommunicator, ModernCommunicator

pytestmark = pytest.mark.django_db(transaction=True)

META_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
META_SPAN = "00f067aa0ba902b7"
HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c"
HEADER_SPAN = "b7ad6b7169203331"
META = {"traceparent": f"00-{META_TRACE}-{META_SPAN}-01", "tracestate": "rojo=00f067aa0ba902b7"}
HEADERS = {"traceparent": f"00-{HEADER_TRACE}-{HEADER_SPAN}-01"}


@pytest.fixture(scope="module")
def exporter():
    """The process's tracer provider (the SDK's; set once per process), with an in-memory exporter."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    recorded = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(recorded))
    yield recorded
    recorded.shutdown()


@pytest.fixture
def spans(exporter):
    tracing.configure()
    exporter.clear()
    return exporter


def named(exporter, name: str) -> list:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def only(exporter, name: str):
    found = named(exporter, name)
    assert len(found) == 1, [span.name for span in exporter.get_finished_spans()]
    return found[0]


async def test_a_legacy_sse_call_has_its_span_with_the_parent_from_meta_and_the_headers_linked(spans):
    session = MCPCommunicator(application)
    await session.initialize()
    response = await session.request("tools/call", {"name": "echo", "arguments": {"message": "a"}, "_meta": META},
                                     headers=HEADERS)
    assert response.messages[-1]["result"]["content"][0]["text"] == "a"
    span = only(spans, "tools/call echo")
    assert span.kind is SpanKind.SERVER
    assert (format(span.context.trace_id, "032x"), format(span.parent.span_id, "016x")) == (META_TRACE, META_SPAN)
    assert span.parent.is_remote and span.parent.trace_state.to_header() == "rojo=00f067aa0ba902b7"
    assert [(format(link.context.trace_id, "032x"), format(link.context.span_id, "016x")) for link in span.links] \
        == [(HEADER_TRACE, HEADER_SPAN)]
    assert dict(span.attributes) == {
        "mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo",
        "jsonrpc.request.id": str(session._id), "mcp.protocol.version": session.version,
        "mcp.session.id": session.session_id, "network.transport": "tcp", "network.protocol.name": "http",
        "network.protocol.version": "1.1", "server.address": "127.0.0.1", "server.port": 80,
        "client.address": "127.0.0.1", "client.port": 50000,
    }
    assert span.status.status_code is StatusCode.UNSET


async def test_initialize_has_its_span_with_the_session_it_created(spans):
    session = MCPCommunicator(application)
    response = await session.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": session.version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"},
        "_meta": META}}, headers=HEADERS)
    span = only(spans, "initialize")
    assert format(span.parent.span_id, "016x") == META_SPAN and span.kind is SpanKind.SERVER
    assert span.attributes["mcp.session.id"] == response.headers["mcp-session-id"]
    assert span.attributes["mcp.protocol.version"] == response.json["result"]["protocolVersion"]
    assert span.attributes["jsonrpc.request.id"] == "1"
    spans.clear()
    refused = await MCPCommunicator(application).post({"jsonrpc": "2.0", "id": 2, "method": "initialize",
                                                      "params": {"protocolVersion": 7}})
    assert refused.status == 400
    failed = only(spans, "initialize")
    assert failed.attributes["error.type"] == str(refused.json["error"]["code"])
    assert "mcp.session.id" not in failed.attributes and failed.status.status_code is StatusCode.ERROR


async def test_without_meta_the_http_headers_context_is_the_parent(spans):
    session = MCPCommunicator(application)
    await session.initialize()
    await session.request("tools/list", headers=HEADERS)
    span = only(spans, "tools/list")
    assert (format(span.context.trace_id, "032x"), format(span.parent.span_id, "016x")) == (HEADER_TRACE, HEADER_SPAN)
    assert span.links == () or list(span.links) == []
    assert "gen_ai.operation.name" not in span.attributes and span.attributes["mcp.method.name"] == "tools/list"


async def test_without_any_context_a_request_starts_its_own_trace(spans):
    session = MCPCommunicator(application)
    await session.initialize()
    await session.request("prompts/get", {"name": "test_simple_prompt"})
    span = only(spans, "prompts/get test_simple_prompt")
    assert span.parent is None and span.attributes["gen_ai.prompt.name"] == "test_simple_prompt"


async def test_errors_are_recorded_as_the_conventions_say(spans):
    session = MCPCommunicator(application)
    await session.initialize()
    await session.call_tool("test_error_handling")
    tool_error = only(spans, "tools/call test_error_handling")
    assert tool_error.attributes["error.type"] == "tool_error" and tool_error.status.status_code is StatusCode.ERROR
    response = await session.call_tool("no_such_tool")
    assert response.messages[-1]["error"]["code"] == -32602
    unknown = only(spans, "tools/call")  # a name no tool has stays out of the span's name
    assert unknown.attributes["gen_ai.tool.name"] == "no_such_tool"
    assert unknown.attributes["error.type"] == unknown.attributes["rpc.response.status_code"] == "-32602"
    assert unknown.status.status_code is StatusCode.ERROR and unknown.status.description


async def test_a_modern_call_has_its_span_with_the_parent_from_meta(spans):
    client = ModernCommunicator(application)
    response = await client.request("tools/call", {"name": "echo", "arguments": {"message": "b"}, "_meta": META},
                                    headers=HEADERS)
    assert response.result["content"][0]["text"] == "b"
    span = only(spans, "tools/call echo")
    assert (format(span.context.trace_id, "032x"), format(span.parent.span_id, "016x")) == (META_TRACE, META_SPAN)
    assert span.attributes["mcp.protocol.version"] == "2026-07-28"
    assert "mcp.session.id" not in span.attributes
    assert span.attributes["jsonrpc.request.id"] == str(response.request["id"])


async def test_a_resumption_has_a_replay_span(spans):
    session = MCPCommunicator(application)
    await session.initialize()
    first = await session.request("tools/call", {"name": "echo", "arguments": {"message": "c"}})
    priming = first.events[0].id
    resumed = await session.send("GET", headers={"last-event-id": priming, **HEADERS})
    assert resumed.messages[-1]["result"]["content"][0]["text"] == "c"
    replay = only(spans, "mcp.sse.replay")
    assert format(replay.parent.span_id, "016x") == HEADER_SPAN
    assert replay.attributes["mcp.session.id"] == session.session_id
    assert replay.attributes["mcp_transport.replayed_events"] == len([e for e in resumed.events if e.data])
    await session.resume("999999-1")
    refused = named(spans, "mcp.sse.replay")[-1]
    assert refused.attributes["error.type"] == "400" and refused.status.status_code is StatusCode.ERROR


async def test_the_database_threads_batches_have_spans_linked_to_their_requests(spans):
    session = MCPCommunicator(application)
    await session.initialize()
    response = await session.request("tools/call", {"name": "progress", "arguments": {"count": 5},
                                                    "_meta": {"progressToken": "p"}})
    assert response.messages[-1]["result"]["content"][0]["text"] == "done 5"
    request = only(spans, "tools/call progress")
    batches = named(spans, "mcp_transport.db.batch")
    linked = [batch for batch in batches
              if any(link.context.span_id == request.context.span_id for link in batch.links)]
    assert linked and all(batch.parent is None for batch in linked)
    assert all(batch.attributes["mcp_transport.batch.calls"] >= 1 for batch in linked)
    assert any("append" in batch.attributes["mcp_transport.batch.operations"] for batch in linked)
    assert all(batch.links for batch in batches)  # none that no request reaches


async def test_tracing_off_makes_no_span(spans):
    with override_settings(MCP_TRANSPORT={"TRACING": False}):
        assert tracing.on is False
        session = MCPCommunicator(application)
        await session.initialize()
        await session.request("tools/call", {"name": "echo", "arguments": {"message": "e"}, "_meta": META})
        await session.resume("1-0")
    tracing.configure()
    assert spans.get_finished_spans() == ()


async def test_without_opentelemetry_api_nothing_is_traced_and_the_checks_say_why(spans, monkeypatch):
    from django.core.checks import run_checks

    monkeypatch.setattr(tracing, "trace", None)
    with override_settings(MCP_TRANSPORT={"TRACING": True}):
        assert tracing.on is False
        assert "mcp_transport.W014" in [m.id for m in run_checks(tags=["mcp_transport"])]
        session = MCPCommunicator(application)
        await session.initialize()
        await session.call_tool("echo", {"message": "f"})
    monkeypatch.undo()
    tracing.configure()
    assert spans.get_finished_spans() == ()
    with override_settings(MCP_TRANSPORT={"TRACING": "yes"}):
        assert tracing.on is False
        assert "mcp_transport.E040" in [m.id for m in run_checks(tags=["mcp_transport"])]
    assert tracing.on is True


async def test_a_notification_has_its_span_without_a_request_id(spans):
    """What a client notifies gets a SERVER span as a request does (its method, its session), with
    no jsonrpc.request.id: nothing answers it."""
    session = MCPCommunicator(application)
    await session.initialize()
    initialized = only(spans, "notifications/initialized")
    assert initialized.kind is SpanKind.SERVER and initialized.attributes["mcp.session.id"] == session.session_id
    assert initialized.attributes["mcp.method.name"] == "notifications/initialized"
    assert "jsonrpc.request.id" not in initialized.attributes and initialized.status.status_code is StatusCode.UNSET
    await session.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 99, "_meta": META}}, headers=HEADERS)
    cancelled = only(spans, "notifications/cancelled")
    assert format(cancelled.parent.span_id, "016x") == META_SPAN
    assert cancelled.attributes["mcp.protocol.version"] == session.version
    spans.clear()
    modern = ModernCommunicator(application)
    response = await modern.post({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
                                 headers={"mcp-protocol-version": modern.version, "mcp-method": "notifications/progress"})
    assert response.status == 202
    pushed = only(spans, "notifications/progress")
    assert pushed.attributes["mcp.protocol.version"] == modern.version and "mcp.session.id" not in pushed.attributes

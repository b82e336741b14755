"""Sampling with tools (SEP-1577) in both revisions, in-process: the example's weather_agent offers
the client's model a get_weather tool, answers its tool uses with tool results, and takes the
final text; the conversation the server sends, and the client's answers, are checked."""
import pytest

from example_project.asgi import application
from mcp_transport import SamplingResult, tool_result, tool_results
from mcp_transport.protocol import sampling
from mcp_transport.testing import MCPCommunicator, ModernCommunicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("mcp_database_settled")]

WITH_TOOLS = {"sampling": {"tools": {}}}
QUESTION = {"role": "user", "content": {"type": "text", "text": "Weather in Paris?"}}
USE = {"type": "tool_use", "id": "use-1", "name": "get_weather", "input": {"city": "Paris"}}
TOOL_USE_ANSWER = {"role": "assistant", "content": [USE], "model": "m", "stopReason": "toolUse"}
FINAL_ANSWER = {"role": "assistant", "content": {"type": "text", "text": "Sunny in Paris."}, "model": "m",
                "stopReason": "endTurn"}
TOOL_RESULT = {"role": "user", "content": [{"type": "tool_result", "toolUseId": "use-1",
                                            "content": [{"type": "text", "text": "sunny, 21 C"}]}]}


def _sampled(response) -> dict:
    """The last sampling/createMessage request in what the call sent so far."""
    return [m for m in response.messages if m.get("method") == "sampling/createMessage"][-1]


async def _answer(client, response, ask, result, until=None):
    await client.post({"jsonrpc": "2.0", "id": ask["id"], "result": result})
    return await client.resume(response.events[-1].id, until=until)


async def test_a_session_tool_loop_with_the_clients_model():
    client = MCPCommunicator(application)
    await client.initialize(WITH_TOOLS)
    response = await client.call_tool("weather_agent", {"question": "Weather in Paris?"},
                                      until=lambda e: e.data and "sampling/createMessage" in e.data)
    first = _sampled(response)
    assert first["params"]["tools"] == [{
        "name": "get_weather", "description": "The weather in a city now",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
    assert first["params"]["toolChoice"] == {"mode": "auto"} and first["params"]["messages"] == [QUESTION]

    second_part = await _answer(client, response, first, TOOL_USE_ANSWER,
                                until=lambda e: e.data and "sampling/createMessage" in e.data)
    second = _sampled(second_part)
    assert second["params"]["messages"] == [QUESTION, {"role": "assistant", "content": [USE]}, TOOL_RESULT]

    await client.post({"jsonrpc": "2.0", "id": second["id"], "result": FINAL_ANSWER})
    rest = await client.resume(response.events[0].id)
    assert rest.result == {"content": [{"type": "text", "text": "Sunny in Paris."}]}


async def test_a_session_without_sampling_tools_gets_no_tools():
    client = MCPCommunicator(application)
    await client.initialize({"sampling": {}})
    response = await client.call_tool("weather_agent", {"question": "?"})
    assert not [m for m in response.messages if m.get("method") == "sampling/createMessage"]
    assert response.result["isError"] is True
    assert "did not declare the 'sampling.tools' capability" in response.result["content"][0]["text"]


@pytest.mark.parametrize("answer", [
    {"role": "assistant", "content": [{"type": "tool_use", "id": "u", "name": "get_weather", "input": "Paris"}]},
    {"role": "assistant", "content": [{"type": "tool_use", "name": "get_weather", "input": {}}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": 1, "name": "get_weather", "input": {}}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "u", "input": {}}]},
    {"role": "assistant", "content": [USE, USE]},
    {"role": "assistant", "content": {"type": "text", "text": 5}},
    {"role": "robot", "content": {"type": "text", "text": "x"}},
    {"role": "assistant", "content": {"type": "text", "text": "x"}, "stopReason": 3},
    {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": ["m"]},
], ids=["input-string", "no-id", "id-int", "no-name", "id-twice", "text-int", "role", "stop-reason-int",
        "model-list"])
async def test_an_answer_a_tool_cannot_read_ends_the_session_call_with_invalid_params(answer):
    client = MCPCommunicator(application)
    await client.initialize(WITH_TOOLS)
    response = await client.call_tool("weather_agent", {"question": "?"},
                                      until=lambda e: e.data and "sampling/createMessage" in e.data)
    ask = _sampled(response)
    await client.post({"jsonrpc": "2.0", "id": ask["id"], "result": answer})
    rest = await client.resume(response.events[0].id)
    assert rest.messages[-1]["error"]["code"] == -32602, rest.messages


# 2026-07-28: each round of the loop is an input request; the retry runs the tool again


async def test_a_modern_tool_loop_over_input_required_rounds():
    client = ModernCommunicator(application, capabilities=WITH_TOOLS)
    first = await client.call_tool("weather_agent", {"question": "Weather in Paris?"})
    (key, ask), = first.result["inputRequests"].items()
    assert key == "round-1" and ask["params"]["tools"][0]["name"] == "get_weather"
    second = await client.retry(first, {"round-1": TOOL_USE_ANSWER})
    (key, ask), = second.result["inputRequests"].items()
    assert key == "round-2" and ask["params"]["messages"][-1] == TOOL_RESULT
    done = await client.retry(second, {"round-2": FINAL_ANSWER})
    assert done.result["resultType"] == "complete"
    assert done.result["content"] == [{"type": "text", "text": "Sunny in Paris."}]


async def test_a_modern_tool_use_of_an_unknown_tool_is_answered_with_an_error_result():
    client = ModernCommunicator(application, capabilities=WITH_TOOLS)
    first = await client.call_tool("weather_agent", {"question": "?"})
    odd = {**TOOL_USE_ANSWER, "content": [{**USE, "name": "launch_rockets"}]}
    second = await client.retry(first, {"round-1": odd})
    (result_block,) = second.result["inputRequests"]["round-2"]["params"]["messages"][-1]["content"]
    assert result_block["isError"] is True and result_block["toolUseId"] == "use-1"


@pytest.mark.parametrize("capabilities, required", [
    ({}, {"sampling": {}}),
    ({"sampling": {}}, {"sampling": {"tools": {}}}),
])
async def test_modern_without_sampling_tools_is_32021_naming_it(capabilities, required):
    response = await ModernCommunicator(application, capabilities=capabilities).call_tool(
        "weather_agent", {"question": "?"})
    assert response.status == 400 and response.json["error"]["code"] == -32021
    assert response.json["error"]["data"] == {"requiredCapabilities": required}


async def test_a_modern_answer_with_a_malformed_tool_use_is_invalid_params():
    client = ModernCommunicator(application, capabilities=WITH_TOOLS)
    first = await client.call_tool("weather_agent", {"question": "?"})
    bad = {**TOOL_USE_ANSWER, "content": [{**USE, "input": ["Paris"]}]}
    reply = await client.retry(first, {"round-1": bad})
    assert reply.json["error"]["code"] == -32602 and "inputResponses.round-1" in reply.json["error"]["message"]


# What a tool builds and reads


def test_the_result_as_a_tool_reads_it():
    result = SamplingResult(TOOL_USE_ANSWER)
    assert result.stop_reason == "toolUse" and result.model == "m" and result.text == ""
    (use,) = result.tool_uses
    assert (use.id, use.name, use.input) == ("use-1", "get_weather", {"city": "Paris"})
    assert result.message() == {"role": "assistant", "content": [USE]}
    assert SamplingResult(FINAL_ANSWER).text == "Sunny in Paris." and SamplingResult({}).tool_uses == []
    assert tool_results({"use-1": "sunny, 21 C"}) == TOOL_RESULT
    assert tool_result("u", {"temp": 21}) == {"type": "tool_result", "toolUseId": "u", "structuredContent": {
        "temp": 21}, "content": [{"type": "text", "text": '{"temp": 21}'}]}
    assert tool_result("u", "boom", is_error=True)["isError"] is True


@pytest.mark.parametrize("messages, fragment", [
    ([QUESTION, TOOL_USE_ANSWER], "need tool results"),
    ([QUESTION, TOOL_USE_ANSWER, QUESTION], "must answer exactly"),
    ([QUESTION, TOOL_USE_ANSWER, {"role": "user", "content": [*TOOL_RESULT["content"], QUESTION["content"]]}],
     "mixes tool results"),
    ([QUESTION, TOOL_RESULT], "no tool use asked for"),
    ([{"role": "user", "content": [USE]}], "only the assistant"),
    ([{"role": "system", "content": QUESTION["content"]}], "role"),
    ([{"role": "user", "content": "text"}], "not content blocks"),
])
def test_a_conversation_the_spec_forbids_is_refused_before_it_is_sent(messages, fragment):
    with pytest.raises(ValueError, match=fragment):
        sampling.check_messages(messages)


def test_tools_and_tool_choice_are_checked():
    from example_project.example.mcp import WEATHER_TOOL
    from mcp_transport import mcp

    assert sampling.tool_definitions([mcp.tools["echo"]])[0]["name"] == "echo"
    assert sampling.tool_definitions([WEATHER_TOOL]) == [WEATHER_TOOL]
    for bad in ([{"name": "x"}], [{"inputSchema": {"type": "object"}}], "tools", [{"name": "x", "inputSchema": {}}]):
        with pytest.raises(ValueError):
            sampling.tool_definitions(bad)
    assert sampling.tool_choice("required") == {"mode": "required"}
    assert sampling.tool_choice({"mode": "none"}) == {"mode": "none"}
    for bad in ("sometimes", {"mode": "x"}, 1):
        with pytest.raises(ValueError):
            sampling.tool_choice(bad)

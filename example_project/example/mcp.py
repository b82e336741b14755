"""The example server: the conformance suite's "everything server" contract, plus echo and progress."""
import asyncio
import base64
import io
import json
import wave
from typing import Annotated

from pydantic import Field

from django.urls import reverse
from django.utils.crypto import salted_hmac

from mcp_transport import (
    Audio, Context, EmbeddedResource, Header, Image, JSONRPCError, PromptMessage, ToolError, ToolResult, mcp,
    tool_results,
)

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _wav() -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)
    return buffer.getvalue()


WAV = _wav()


# The bench tools

@mcp.tool
async def echo(message: str) -> str:
    """Return the message unchanged."""
    return message


@mcp.tool(scopes=["profile"])
async def whoami(ctx: Context) -> str:
    """The caller's username: a tool an OAuth token reaches only with the profile scope."""
    return ctx.user.get_username() if ctx.user is not None else "anonymous"


@mcp.tool(task_support="optional")
async def progress(ctx: Context, count: int = 10, delay: float = 0.01) -> str:
    """Send `count` progress notifications `delay` seconds apart, then return "done <count>"."""
    for i in range(1, count + 1):
        if delay:
            await asyncio.sleep(delay)
        await ctx.report_progress(i, count, f"step {i}")
    return f"done {count}"


# The conformance contract

@mcp.tool
def test_simple_text() -> str:
    """Return a simple text response."""
    return "This is a simple text response for testing."


@mcp.tool
def test_image_content():
    """Return a 1x1 PNG image."""
    return [Image(PNG_1X1, "image/png")]


@mcp.tool
def test_audio_content():
    """Return a short silent WAV clip."""
    return [Audio(WAV, "audio/wav")]


@mcp.tool
def test_embedded_resource():
    """Return an embedded text resource."""
    return [EmbeddedResource("test://embedded-resource", text="This is an embedded resource content.",
                             mime_type="text/plain")]


@mcp.tool
def test_multiple_content_types():
    """Return text, an image and an embedded JSON resource together."""
    return [
        "Multiple content types test:",
        Image(PNG_1X1, "image/png"),
        EmbeddedResource("test://mixed-content-resource", text=json.dumps({"test": "data", "value": 123}),
                         mime_type="application/json"),
    ]


@mcp.tool
async def test_tool_with_logging(ctx: Context) -> str:
    """Send three log messages while running."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@mcp.tool
async def test_tool_with_progress(ctx: Context) -> str:
    """Report progress 0, 50 and 100 of 100."""
    for value in (0, 50, 100):
        await ctx.report_progress(value, 100, f"Completed step {value} of 100")
        if value < 100:
            await asyncio.sleep(0.05)
    return "Tool with progress executed successfully"


@mcp.tool
def test_error_handling():
    """Return a tool error result (not a protocol error)."""
    return ToolResult(["This tool intentionally returns an error for testing"], is_error=True)


@mcp.tool
async def test_sampling(ctx: Context, prompt: str) -> str:
    """Ask the client's model to answer the prompt."""
    result = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {result.text}"


@mcp.tool
async def test_elicitation(ctx: Context, message: str) -> str:
    """Ask the user for a username and an email."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await ctx.elicit(message, schema)
    return f"User response: action={result.get('action')}, content={json.dumps(result.get('content'))}"


@mcp.tool
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicit with default values for every primitive type (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                       "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    result = await ctx.elicit("Please review and update the form fields with defaults", schema)
    return f"Elicitation completed: action={result.get('action')}, content={json.dumps(result.get('content'))}"


@mcp.tool
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicit with every enum shape (SEP-1330)."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Choose an option",
                               "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Choose a titled option", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ]},
            "legacyEnum": {"type": "string", "description": "Choose a legacy option",
                           "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Choose multiple options",
                              "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Choose multiple titled options", "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]}},
        },
        "required": [],
    }
    result = await ctx.elicit("Please select options from the enum fields", schema)
    return f"Elicitation completed: action={result.get('action')}, content={json.dumps(result.get('content'))}"


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "address",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
    },
    "allOf": [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}]}],
    "if": {"properties": {"name": {"const": "anonymous"}}, "required": ["name"]},
    "then": {"not": {"required": ["address"]}},
    "else": {},
    "additionalProperties": False,
}


@mcp.tool(input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(name: str | None = None, address: dict | None = None) -> str:
    """A tool whose input schema uses JSON Schema 2020-12 features."""
    return f"Received: {json.dumps({'name': name, 'address': address})}"


@mcp.tool
async def test_reconnection(ctx: Context) -> str:
    """Close this call's SSE connection mid-call (SEP-1699); the result arrives on the resumed stream."""
    await ctx.close_sse_stream(retry_ms=200)
    await asyncio.sleep(0.5)
    return "Reconnection test completed successfully"


# Resources

@mcp.resource("test://static-text", name="Static Text Resource", mime_type="text/plain",
              description="A static text resource for testing")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="Static Binary Resource", mime_type="image/png",
              description="A static binary resource (PNG) for testing")
def static_binary() -> bytes:
    return PNG_1X1


@mcp.resource("test://template/{id}/data", name="Resource Template", mime_type="application/json",
              description="A resource template with a parameter")
def template_data(id: str) -> dict:
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


@mcp.resource("test://watched-resource", name="Watched Resource", mime_type="text/plain",
              description="A resource that can be subscribed to")
def watched() -> str:
    return "Watched resource content"


# Prompts

@mcp.prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


def _complete_arg(value: str, context: dict):
    return [v for v in ("paris", "park", "party") if v.startswith(value)]


@mcp.prompt(completions={"arg1": _complete_arg, "arg2": _complete_arg})
def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> str:
    """A prompt with required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt
def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],
):
    """A prompt that embeds a resource."""
    return [
        PromptMessage("user", EmbeddedResource(resourceUri, text="Embedded resource content for testing.",
                                               mime_type="text/plain")),
        "Please process the embedded resource above.",
    ]


@mcp.prompt
def test_prompt_with_image():
    """A prompt that includes an image."""
    return [PromptMessage("user", Image(PNG_1X1, "image/png")), "Please analyze the image above."]


@mcp.tool
async def update_resource(ctx: Context, uri: str = "test://watched-resource") -> str:
    """Announce that a resource changed: subscribed sessions get notifications/resources/updated on their GET stream."""
    await ctx.server.notify_resource_updated(uri)
    return f"updated {uri}"


# The 2026-07-28 contract (the conformance suite's pre-release line)

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def _text(result: dict) -> str:
    content = result.get("content")
    if isinstance(content, list):
        content = content[0] if content else {}
    return content.get("text", "") if isinstance(content, dict) else ""


@mcp.tool
def test_header_param(region: Annotated[str, Header("Region")], query: str = "") -> str:
    """Mirror `region` as the Mcp-Param-Region header (2026-07-28 clients send it; the server checks it)."""
    return f"region={region} query={query}"


@mcp.tool
async def test_trigger_tool_change(ctx: Context) -> str:
    """Tell every listener that the tool list changed (sessions' GET streams, 2026-07-28 listen streams)."""
    await ctx.server.notify_list_changed("tools")
    return "tools list changed"


@mcp.tool
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Tell every listener that the prompt list changed."""
    await ctx.server.notify_list_changed("prompts")
    return "prompts list changed"


@mcp.tool
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability (-32021 without it)."""
    ctx.require_capability("sampling")
    return "The client can sample."


@mcp.tool
async def test_streaming_elicitation(ctx: Context) -> str:
    """Report progress, then ask the user to confirm (an input_required result on 2026-07-28)."""
    await ctx.report_progress(0, 1, "asking")
    answer = await ctx.elicit("Continue?", CONFIRM_SCHEMA, key="confirm")
    return f"Streaming complete ({answer.get('action')})"


@mcp.tool
async def test_logging_tool(ctx: Context) -> str:
    """Log at info level; a 2026-07-28 client sees the messages only when its request asks for a log level."""
    await ctx.info("Logging tool started")
    await ctx.info("Logging tool finished")
    return "Logged."


@mcp.tool
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Ask the user's name (key user_name), then greet them."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {(answer.get('content') or {}).get('name', 'stranger')}!"


@mcp.tool
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Ask the client's model a question (key capital_question)."""
    answer = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"The model says: {_text(answer)}"


@mcp.tool
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Ask the client for its roots (key client_roots)."""
    roots = await ctx.list_roots(key="client_roots")
    return f"The client has {len(roots)} root(s): " + ", ".join(r.get("uri", "") for r in roots)


@mcp.tool
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Ask for a confirmation (key confirm); the answer comes back with the request state."""
    answer = await ctx.elicit("Confirm?", CONFIRM_SCHEMA, key="confirm")
    return "state-ok" if (answer.get("content") or {}).get("ok") else "state-declined"


@mcp.tool
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Ask three questions at once: the user's name, the model's greeting, the client's roots."""
    answers = await ctx.ask({
        "user_name": ctx.elicitation("What is your name?", NAME_SCHEMA),
        "greeting": ctx.sampling("Say hello.", max_tokens=50),
        "client_roots": ctx.roots_request(),
    })
    name = (answers["user_name"].get("content") or {}).get("name", "stranger")
    return f"{_text(answers['greeting'])} {name}, with {len(answers['client_roots'].get('roots', []))} root(s)"


@mcp.tool
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Ask the user's name, then (a second round) their favourite colour."""
    name = await ctx.elicit("What is your name?", NAME_SCHEMA, key="step1")
    color = await ctx.elicit("What is your favourite colour?", {
        "type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}, key="step2")
    return f"{(name.get('content') or {}).get('name')} likes {(color.get('content') or {}).get('color')}"


@mcp.tool
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Ask for a confirmation; a retry whose requestState was altered is refused."""
    answer = await ctx.elicit("Confirm?", CONFIRM_SCHEMA, key="confirm")
    return f"confirmed: {(answer.get('content') or {}).get('ok')}"


@mcp.tool
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Ask only through what the client declared: elicitation if it can, else its model."""
    if "elicitation" in ctx.client_capabilities:
        answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
        return f"Hello, {(answer.get('content') or {}).get('name')}!"
    answer = await ctx.sample("What is the user's name?", max_tokens=50, key="user_name_guess")
    return f"The model guessed: {_text(answer)}"


@mcp.prompt
async def test_input_required_result_prompt(ctx: Context) -> list:
    """A prompt that asks the user for context first (key user_context)."""
    answer = await ctx.elicit("What should the prompt be about?", {
        "type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}, key="user_context")
    return [PromptMessage("user", f"Use this context: {(answer.get('content') or {}).get('context', '')}")]


# Tasks (the tasks extension's contract in the conformance suite; long tools anyone may call)

@mcp.tool(icons=[{"src": "data:image/png;base64," + base64.b64encode(PNG_1X1).decode(), "mimeType": "image/png",
                  "sizes": ["1x1"]}])
def greet(name: str) -> str:
    """Greet someone at once (never a task)."""
    return f"Hello, {name}!"


@mcp.tool(task_support="optional")
async def slow_compute(seconds: float = 1.0, label: str = "") -> str:
    """Work for `seconds`; past TASK_GRACE_SECONDS the call becomes a task the client polls."""
    await asyncio.sleep(seconds)
    return f"Computed {label or 'result'} in {seconds:g}s"


@mcp.tool(task_support="required")
async def failing_job() -> str:
    """Work for a second, then fail as a tool does (a completed task whose result is an error)."""
    await asyncio.sleep(1)
    raise ToolError("The job failed: the input was rejected")


@mcp.tool(task_support="optional")
async def protocol_error_job() -> str:
    """Work for a second, then fail with a JSON-RPC error (a failed task)."""
    await asyncio.sleep(1)
    raise JSONRPCError(-32603, "The job could not run: its backend is unavailable")


@mcp.tool(task_support="optional")
async def confirm_delete(ctx: Context, path: str = "/tmp/example") -> str:
    """Become a task at once, then wait in it for the user's confirmation (tasks/update)."""
    await ctx.continue_as_task("Waiting for confirmation")
    answer = await ctx.elicit(f"Delete {path}?", CONFIRM_SCHEMA, key="confirm")
    confirmed = answer.get("action") == "accept" and (answer.get("content") or {}).get("ok", True)
    return f"Deleted {path}" if confirmed else f"Kept {path}"


@mcp.tool(task_support="optional")
async def multi_input(ctx: Context) -> str:
    """Become a task, then ask two questions at once; it goes on once both are answered."""
    await ctx.continue_as_task()
    answers = await ctx.ask({
        "first_name": ctx.elicitation("First name?", NAME_SCHEMA),
        "last_name": ctx.elicitation("Last name?", NAME_SCHEMA),
    })
    names = [(answers[key].get("content") or {}).get("name", "") for key in ("first_name", "last_name")]
    return "Hello, " + " ".join(names) + "!"


@mcp.tool(task_support="required")
async def test_tool_with_task(ctx: Context) -> str:
    """Ask the user's name (an input_required result), then go on as a task."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    await ctx.continue_as_task()
    await asyncio.sleep(0.2)
    return f"Hello, {(answer.get('content') or {}).get('name', 'stranger')}, from a task!"


# URL-mode elicitation: pages of this server's own (example.views.connect), where what the user
# enters never passes through the client

def _elicitation_id(ctx: Context, purpose: str) -> str:
    """The same id on every call of one client (its session, else its principal), naming neither:
    a 2026-07-28 retry must ask the same question again."""
    owner = ctx.session.id if ctx.session is not None else f"principal:{ctx.principal}"
    return f"{purpose}-{salted_hmac('example.elicitation', owner, algorithm='sha256').hexdigest()[:32]}"


def _page_url(ctx: Context, elicitation_id: str) -> str:
    host = dict((ctx.scope or {}).get("headers") or []).get(b"host", b"127.0.0.1").decode("latin-1")
    return f"http://{host}{reverse('connect', args=[elicitation_id])}"


@mcp.tool
async def connect_account(ctx: Context) -> str:
    """Needs an account connected on a page of the server's: until the user has completed it, the
    call fails with -32042 listing the page (2025-11-25), or asks for it again (2026-07-28)."""
    elicitation_id = _elicitation_id(ctx, "connect")
    if await ctx.elicitation_completed(elicitation_id):
        return "Your account is connected."
    await ctx.require_url_elicitation("Connect your account to continue.", _page_url(ctx, elicitation_id),
                                      elicitation_id=elicitation_id, key="connect")


@mcp.tool(task_support="optional")
async def open_settings_page(ctx: Context) -> str:
    """Send the user to a settings page (URL mode) and say what they answered: "accept" is their
    consent to open it; the page announces when they are done (notifications/elicitation/complete).
    A client may run it as a task: the question then waits in the task."""
    elicitation_id = _elicitation_id(ctx, "settings")
    answer = await ctx.elicit_url("Set your API key on this page.", _page_url(ctx, elicitation_id),
                                  elicitation_id=elicitation_id, key="settings")
    done = await ctx.elicitation_completed(elicitation_id)
    return f"action={answer['action']} elicitationId={answer['elicitationId']} completed={done}"


@mcp.tool
async def set_api_key(ctx: Context, wait_seconds: float = 60) -> str:
    """Send the user to the page where they set their API key, and wait until they are done there."""
    elicitation_id = _elicitation_id(ctx, "api-key")
    answer = await ctx.elicit_url("Set your API key on this page.", _page_url(ctx, elicitation_id),
                                  elicitation_id=elicitation_id, key="api_key")
    if answer["action"] != "accept":
        return "The API key was not set."
    if await ctx.wait_for_elicitation(elicitation_id, timeout=wait_seconds):
        return "The API key is set."
    return "The page was not completed in time."


# Sampling with tools: the client's model may call a tool this server offers for the conversation

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The weather in a city now",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEATHER = {"paris": "sunny, 21 C", "oslo": "snow, -3 C", "lima": "cloudy, 18 C"}
SAMPLING_ROUNDS = 3


def _weather(use) -> str:
    city = use.input.get("city") if use.name == "get_weather" else None
    if not isinstance(city, str):
        return ToolResult([f"Unknown tool or arguments: {use.name}"], is_error=True).to_dict()
    return WEATHER.get(city.lower(), "no data for that city")


@mcp.tool
async def weather_agent(ctx: Context, question: str) -> str:
    """Let the client's model answer `question` with a get_weather tool it may use (up to 3 rounds)."""
    messages = [{"role": "user", "content": {"type": "text", "text": question}}]
    for round_number in range(1, SAMPLING_ROUNDS + 1):
        result = await ctx.sample(messages, tools=[WEATHER_TOOL], tool_choice="auto", max_tokens=200,
                                  key=f"round-{round_number}")
        if not result.tool_uses:
            return result.text
        answers = {use.id: _weather(use) for use in result.tool_uses}
        messages = [*messages, result.message(), tool_results(answers)]
    return f"The model was still using tools after {SAMPLING_ROUNDS} rounds."

"""The protocol layer alone: JSON-RPC parsing, schemas from type hints, result conversion."""
import json
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from mcp_transport import EmbeddedResource, Image, MCPServer, ToolError, ToolResult
from mcp_transport.protocol import jsonrpc
from mcp_transport.protocol.content import prompt_messages, resource_contents, tool_result
from mcp_transport.protocol.context import Context
from mcp_transport.protocol.dispatch import negotiate
from mcp_transport.protocol.registry import call_tool


@pytest.mark.parametrize("body,code", [
    (b"{", jsonrpc.PARSE_ERROR),
    (b"\xff\xfe", jsonrpc.PARSE_ERROR),
    (b"[]", jsonrpc.INVALID_REQUEST),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', jsonrpc.INVALID_REQUEST),
    (b'"ping"', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":{},"method":"ping"}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"result":{},"error":{}}', jsonrpc.INVALID_REQUEST),
])
def test_bad_messages_are_rejected_with_the_right_code(body, code):
    with pytest.raises(jsonrpc.JSONRPCError) as info:
        jsonrpc.parse(body)
    assert info.value.code == code


def test_message_kinds():
    assert jsonrpc.parse(b'{"jsonrpc":"2.0","id":"a","method":"ping"}').kind == "request"
    assert jsonrpc.parse(b'{"jsonrpc":"2.0","method":"notifications/initialized"}').kind == "notification"
    response = jsonrpc.parse(b'{"jsonrpc":"2.0","id":"srv-1","result":{"action":"accept"}}')
    assert response.kind == "response" and response.id == "srv-1"


def test_version_negotiation():
    assert negotiate("2025-06-18") == "2025-06-18"
    assert negotiate("2025-03-26") == "2025-03-26"
    assert negotiate("2099-01-01") == "2025-11-25"


class Point(BaseModel):
    x: int
    y: int


def make_server(name):
    from mcp_transport.protocol.server import servers

    servers.pop(name, None)
    return MCPServer(name)


def test_input_schema_comes_from_type_hints():
    server = make_server("schema-test")

    @server.tool
    def add(a: int, b: Annotated[float, Field(description="second")] = 1.5, *, point: Point | None = None,
            ctx: Context = None) -> int:
        """Add numbers."""
        return a + b

    definition = server.tools["add"].definition()
    schema = definition["inputSchema"]
    assert definition["description"] == "Add numbers."
    assert schema["type"] == "object" and schema["required"] == ["a"]
    assert schema["properties"]["a"]["type"] == "integer"
    assert schema["properties"]["b"]["description"] == "second"
    assert "ctx" not in schema["properties"]
    assert "$defs" in schema and "Point" in schema["$defs"]


def test_explicit_input_schema_is_kept_verbatim():
    server = make_server("verbatim-test")
    given = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
             "properties": {}, "additionalProperties": False}

    @server.tool(input_schema=given)
    def f():
        """F."""

    assert server.tools["f"].definition()["inputSchema"] == given


class _NoHost:
    async def send(self, message):
        pass


def _ctx(server):
    return Context(server=server, session=None, request_id=1, params={}, host=_NoHost())


async def test_sync_and_async_tools_validate_arguments():
    server = make_server("call-test")

    @server.tool
    def double(n: int) -> int:
        """Double."""
        return n * 2

    @server.tool
    async def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    assert (await call_tool(server.tools["double"], {"n": "21"}, _ctx(server)))["content"][0]["text"] == "42"
    assert (await call_tool(server.tools["shout"], {"text": "hi"}, _ctx(server)))["content"][0]["text"] == "HI"
    bad = await call_tool(server.tools["double"], {"n": "x"}, _ctx(server))
    assert bad["isError"] is True and "n" in bad["content"][0]["text"]
    missing = await call_tool(server.tools["double"], {}, _ctx(server))
    assert missing["isError"] is True


async def test_tool_errors_become_results_not_protocol_errors():
    server = make_server("error-test")

    @server.tool
    def fails():
        """Fail."""
        raise ToolError("nope")

    @server.tool
    def crashes():
        """Crash."""
        raise RuntimeError("secret detail")

    assert await call_tool(server.tools["fails"], {}, _ctx(server)) == {
        "content": [{"type": "text", "text": "nope"}], "isError": True}
    crashed = await call_tool(server.tools["crashes"], {}, _ctx(server))
    assert crashed["isError"] is True


def test_tool_result_conversion():
    assert tool_result("hi") == {"content": [{"type": "text", "text": "hi"}]}
    assert tool_result(None) == {"content": []}
    assert tool_result(Point(x=1, y=2))["structuredContent"] == {"x": 1, "y": 2}
    assert tool_result({"a": 1})["structuredContent"] == {"a": 1}
    image = tool_result([Image(b"\x89PNG", "image/png")])["content"][0]
    assert image == {"type": "image", "data": "iVBORw==", "mimeType": "image/png"}
    assert tool_result(ToolResult(["x"], is_error=True)) == {"content": [{"type": "text", "text": "x"}],
                                                             "isError": True}
    embedded = tool_result([EmbeddedResource("test://r", text="t", mime_type="text/plain")])["content"][0]
    assert embedded == {"type": "resource", "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "t"}}


def test_resource_and_prompt_conversion():
    assert resource_contents("u://x", "text", None) == [{"uri": "u://x", "mimeType": "text/plain", "text": "text"}]
    assert resource_contents("u://x", b"\x00", "image/png")[0]["blob"] == "AA=="
    assert json.loads(resource_contents("u://x", {"k": 1}, None)[0]["text"]) == {"k": 1}
    assert prompt_messages("hello") == [{"role": "user", "content": {"type": "text", "text": "hello"}}]


def test_resource_templates_match_their_variables():
    server = make_server("template-test")

    @server.resource("test://items/{item_id}/data")
    def item(item_id: str):
        return item_id

    resource, args = server.find_resource("test://items/42/data")
    assert resource is server.resources["test://items/{item_id}/data"] and args == {"item_id": "42"}
    assert server.find_resource("test://items/42/other") == (None, None)
    assert resource.definition()["uriTemplate"] == "test://items/{item_id}/data"


@pytest.mark.parametrize("body", [
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":1e400}}',
    b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\\udfff"}}',
])
def test_non_json_numbers_and_unpaired_surrogates_are_parse_errors(body):
    with pytest.raises(jsonrpc.JSONRPCError) as info:
        jsonrpc.parse(body)
    assert info.value.code == jsonrpc.PARSE_ERROR


def test_paired_surrogates_are_fine_and_output_is_always_valid_ascii_json():
    assert jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"\\ud83d\\ude00"}').method == "\U0001F600"
    out = jsonrpc.dumps({"text": "\ud800 \u2028 \u00e9", "n": float("nan"), "big": [float("inf")]})
    assert out.isascii() and json.loads(out) == {"text": "\ud800 \u2028 \u00e9", "n": None, "big": [None]}


# Output schemas: derived from the return annotation, enforced on every call


def test_output_schemas_from_return_annotations_and_their_enforcement():
    import asyncio
    from typing_extensions import TypedDict  # pydantic reads typing.TypedDict from Python 3.12 on

    from pydantic import BaseModel

    from mcp_transport import MCPServer
    from mcp_transport.protocol import server as servers
    from mcp_transport.protocol.registry import call_tool

    class Point(TypedDict):
        x: int
        y: int

    class Book(BaseModel):
        title: str

    other = MCPServer("output-schemas")
    try:
        @other.tool
        def count() -> int:
            """A primitive: carried as {"result": ...}."""
            return 3

        @other.tool
        def point() -> Point:
            """An object: the structured content itself."""
            return {"x": 1, "y": 2}

        @other.tool
        def bad_point() -> Point:
            """Claims a Point, returns something else."""
            return {"x": "one"}

        @other.tool(output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
        def declared() -> dict:
            """A schema declared by hand."""
            return {"n": "not a number"}

        @other.tool
        def book() -> Book:
            return Book(title="Dune")

        @other.tool
        def text() -> str:
            return "plain"

        tools = other.tools
        assert tools["count"].output_schema == {"type": "object", "properties": {"result": {"type": "integer"}},
                                                "required": ["result"]}
        assert tools["point"].output_schema["properties"] == {"x": {"title": "X", "type": "integer"},
                                                              "y": {"title": "Y", "type": "integer"}}
        assert tools["text"].output_schema is None and "outputSchema" not in tools["text"].definition()

        def run(name):
            return asyncio.run(call_tool(tools[name], {}, None))

        assert run("count") == {"content": [{"type": "text", "text": "3"}], "structuredContent": {"result": 3}}
        assert run("point")["structuredContent"] == {"x": 1, "y": 2}
        assert run("book")["structuredContent"] == {"title": "Dune"}
        for name in ("bad_point", "declared"):
            result = run(name)
            assert result["isError"] is True and "does not match its output schema" in result["content"][0]["text"]
        assert run("text") == {"content": [{"type": "text", "text": "plain"}]}
    finally:
        del servers.servers["output-schemas"]


def test_icons_server_identity_and_resource_not_found():
    import asyncio

    import pytest

    from mcp_transport import MCPServer, ResourceNotFound
    from mcp_transport.protocol import server as servers
    from mcp_transport.protocol.context import Context
    from mcp_transport.protocol.jsonrpc import JSONRPCError

    icon = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}
    other = MCPServer("icons", title="Library", description="Books and loans", website_url="https://example.com",
                      icons=[icon])
    try:
        @other.tool(icons=[icon])
        def lend() -> str:
            """Lend a book."""
            return "ok"

        @other.resource("books://{isbn}", icons=[{"src": "data:image/png;base64,AAAA"}])
        def book(isbn: str) -> str:
            raise ResourceNotFound(f"No book {isbn}")

        @other.prompt(icons=[icon])
        def review() -> str:
            return "Review it."

        assert other.info() == {"name": "icons", "version": "0.1.0", "title": "Library",
                                "description": "Books and loans", "websiteUrl": "https://example.com",
                                "icons": [icon]}
        assert other.tools["lend"].definition()["icons"] == [icon]
        assert other.resources["books://{isbn}"].definition()["icons"][0]["src"].startswith("data:")
        assert other.prompts["review"].definition()["icons"] == [icon]
        with pytest.raises(ValueError, match="https: or data:"):
            other.tool(icons=[{"src": "javascript:alert(1)"}])(lambda: "x")
        with pytest.raises(ValueError, match="theme"):
            other.tool(icons=[{"src": "https://x/i.png", "theme": "blue"}])(lambda: "x")

        ctx = Context(server=other, session=None, request_id=1, params={}, host=None)
        with pytest.raises(JSONRPCError) as missing:
            asyncio.run(other.dispatcher.resources_read({"uri": "books://123"}, ctx))
        assert missing.value.code == -32002 and missing.value.data == {"uri": "books://123"}
        assert missing.value.message == "No book 123"
    finally:
        del servers.servers["icons"]

"""Sampling with tools (2025-11-25, SEP-1577): the tools a tool offers the client's model, the
conversation it sends, and the model's answer as a tool reads it.

The spec puts the burden of a well-formed conversation on the server: a user message carrying
tool results carries nothing else, and every assistant `tool_use` is answered by the next
message, a user message with a `tool_result` for each of its ids. `check_messages` refuses
anything else before it is sent (a ValueError: the tool's own mistake, not the client's).
"""
from __future__ import annotations

from typing import Any

from . import content, jsonrpc

TOOL_CHOICES = ("auto", "required", "none")
ROLES = ("user", "assistant")


def _blocks(message_content) -> list:
    return message_content if isinstance(message_content, list) else [message_content]


def tool_definitions(tools) -> list[dict]:
    """The `tools` of a sampling request: each a Tool dict (`name`, `inputSchema` an object schema)
    or a tool registered on a server (its definition)."""
    if not isinstance(tools, (list, tuple)):
        raise ValueError("tools must be a list")
    definitions = []
    for tool in tools:
        definition = tool.definition() if callable(getattr(tool, "definition", None)) else tool
        if not isinstance(definition, dict) or not isinstance(definition.get("name"), str) or not definition["name"]:
            raise ValueError(f"A sampling tool needs a name: {tool!r}")
        schema = definition.get("inputSchema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise ValueError(f"Sampling tool {definition['name']!r} needs an inputSchema of type object")
        definitions.append(definition)
    return definitions


def tool_choice(choice) -> dict:
    """`"auto"`, `"required"`, `"none"` or `{"mode": ...}`, as the ToolChoice object."""
    mode = choice.get("mode", "auto") if isinstance(choice, dict) else choice
    if mode not in TOOL_CHOICES:
        raise ValueError(f"tool_choice must be one of {', '.join(TOOL_CHOICES)}, not {choice!r}")
    return {**choice} if isinstance(choice, dict) else {"mode": mode}


def check_messages(messages: list) -> None:
    """Raise ValueError unless the conversation is one the spec lets a server send."""
    open_uses: set[str] | None = None
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ValueError(f"Sampling message {index} needs a role of user or assistant")
        blocks = _blocks(message.get("content"))
        if not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in blocks):
            raise ValueError(f"Sampling message {index} has content that is not content blocks")
        results = [b for b in blocks if b["type"] == "tool_result"]
        if results and (message["role"] != "user" or len(results) != len(blocks)):
            raise ValueError(f"Sampling message {index} mixes tool results with other content")
        if open_uses is not None:
            answered = {b.get("toolUseId") for b in results}
            if answered != open_uses:
                raise ValueError(f"Sampling message {index} must answer exactly the tool uses "
                                 f"{sorted(open_uses)} with tool results")
            open_uses = None
        elif results:
            raise ValueError(f"Sampling message {index} has tool results no tool use asked for")
        uses = [b for b in blocks if b["type"] == "tool_use"]
        if uses:
            if message["role"] != "assistant":
                raise ValueError(f"Sampling message {index}: only the assistant uses tools")
            open_uses = {b.get("id") for b in uses}
    if open_uses is not None:
        raise ValueError(f"The last sampling message's tool uses {sorted(open_uses)} need tool results")


def _valid_block(block) -> bool:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return False
    if block["type"] == "tool_use":
        return (isinstance(block.get("id"), str) and isinstance(block.get("name"), str)
                and isinstance(block.get("input"), dict))
    if block["type"] == "tool_result":
        return isinstance(block.get("toolUseId"), str) and isinstance(block.get("content"), list)
    if block["type"] == "text":
        return isinstance(block.get("text"), str)
    return True


def check_result(where: str, response: dict) -> dict:
    """A CreateMessageResult a tool can read: content blocks (a tool use with its id, name and input
    object), and a role, stop reason and model of the right types when present."""
    blocks = response.get("content")
    if not all(_valid_block(block) for block in _blocks(blocks)):
        raise jsonrpc.InvalidParams(f"Invalid params: {where} must be a sampling result with content")
    if "role" in response and response["role"] not in ROLES:
        raise jsonrpc.InvalidParams(f"Invalid params: {where}.role must be user or assistant")
    for field in ("stopReason", "model"):
        if response.get(field) is not None and not isinstance(response[field], str):
            raise jsonrpc.InvalidParams(f"Invalid params: {where}.{field} must be a string")
    uses = [b for b in _blocks(blocks) if b["type"] == "tool_use"]
    if len({b["id"] for b in uses}) != len(uses):
        raise jsonrpc.InvalidParams(f"Invalid params: {where} uses one tool use id twice")
    return response


class ToolUse(dict):
    """A `tool_use` block of the model's answer: `id`, `name`, `input` as attributes too."""

    @property
    def id(self) -> str:
        return self["id"]

    @property
    def name(self) -> str:
        return self["name"]

    @property
    def input(self) -> dict:
        return self["input"]


class SamplingResult(dict):
    """The client's CreateMessageResult as it sent it, with what a tool reads in it.

    `tool_uses` are the model's requests to use the offered tools (`stop_reason == "toolUse"`);
    answer them by sending `messages + [result.message(), tool_results({...})]` in the next
    `ctx.sample()`.
    """

    @property
    def blocks(self) -> list[dict]:
        value = self.get("content")
        return [] if value is None else _blocks(value)

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.blocks if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[ToolUse]:
        return [ToolUse(b) for b in self.blocks if b.get("type") == "tool_use"]

    @property
    def stop_reason(self) -> str | None:
        return self.get("stopReason")

    @property
    def model(self) -> str | None:
        return self.get("model")

    def message(self) -> dict:
        """This answer as the assistant message of the conversation's history."""
        return {"role": self.get("role", "assistant"), "content": self.blocks}


def tool_result(tool_use_id: str, value: Any, *, is_error: bool = False) -> dict:
    """A `tool_result` block answering one tool use; `value` as a tool returns it (text, content,
    a dict for structured content)."""
    block = {"type": "tool_result", "toolUseId": tool_use_id, **content.tool_result(value)}
    if is_error:
        block["isError"] = True
    return block


def tool_results(results: dict[str, Any]) -> dict:
    """The user message answering the model's tool uses: tool use id -> its result's value (or a
    `tool_result(...)` block already built)."""
    blocks = [value if isinstance(value, dict) and value.get("type") == "tool_result" else tool_result(use_id, value)
              for use_id, value in results.items()]
    return {"role": "user", "content": blocks}

"""Content a tool, resource or prompt may return, and how plain Python values become MCP content."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


@dataclass
class Text:
    text: str
    annotations: dict | None = None

    def to_dict(self):
        return _with_annotations({"type": "text", "text": self.text}, self.annotations)


@dataclass
class Image:
    """Image content; `data` is raw bytes or already base64-encoded text."""

    data: bytes | str
    mime_type: str = "image/png"
    annotations: dict | None = None
    kind = "image"

    def to_dict(self):
        return _with_annotations(
            {"type": self.kind, "data": _b64(self.data), "mimeType": self.mime_type}, self.annotations
        )


@dataclass
class Audio(Image):
    mime_type: str = "audio/wav"
    kind = "audio"


@dataclass
class EmbeddedResource:
    """A resource's contents inlined in a result: give `text` or `blob` (bytes)."""

    uri: str
    text: str | None = None
    blob: bytes | str | None = None
    mime_type: str | None = None
    annotations: dict | None = None

    def contents(self):
        item = {"uri": self.uri}
        if self.mime_type:
            item["mimeType"] = self.mime_type
        if self.blob is not None:
            item["blob"] = _b64(self.blob)
        else:
            item["text"] = self.text or ""
        return item

    def to_dict(self):
        return _with_annotations({"type": "resource", "resource": self.contents()}, self.annotations)


@dataclass
class ResourceLink:
    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None

    def to_dict(self):
        item = {"type": "resource_link", "uri": self.uri, "name": self.name}
        if self.description:
            item["description"] = self.description
        if self.mime_type:
            item["mimeType"] = self.mime_type
        return item


@dataclass
class ToolResult:
    """A full tool result when plain return values are not enough."""

    content: list = field(default_factory=list)
    structured: dict | None = None
    is_error: bool = False

    def to_dict(self):
        out = {"content": [content_item(c) for c in self.content]}
        if self.structured is not None:
            out["structuredContent"] = self.structured
        if self.is_error:
            out["isError"] = True
        return out


@dataclass
class PromptMessage:
    role: str
    content: Any

    def to_dict(self):
        return {"role": self.role, "content": content_item(self.content)}


class ToolError(Exception):
    """Raise in a tool to return `isError: true` with this message (not a JSON-RPC error)."""


class ResourceNotFound(Exception):
    """Raise in a resource function when what the URI names does not exist (a template's row, say):
    the client gets "resource not found" (-32002 on a session, -32602 on 2026-07-28), not an
    internal error."""


def _with_annotations(item: dict, annotations):
    if annotations:
        item["annotations"] = annotations
    return item


def content_item(value) -> dict:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, str):
        return {"type": "text", "text": value}
    if isinstance(value, dict) and "type" in value:
        return value
    if isinstance(value, BaseModel):
        return {"type": "text", "text": value.model_dump_json()}
    return {"type": "text", "text": json.dumps(value, default=str)}


def tool_result(value) -> dict:
    """Whatever a tool returned -> CallToolResult."""
    if isinstance(value, ToolResult):
        return value.to_dict()
    if isinstance(value, dict) and "content" in value and isinstance(value["content"], list):
        return value
    if value is None:
        return {"content": []}
    if isinstance(value, BaseModel):
        data = value.model_dump(mode="json")
        return {"content": [{"type": "text", "text": json.dumps(data)}], "structuredContent": data}
    if isinstance(value, (list, tuple)):
        return {"content": [content_item(v) for v in value]}
    if isinstance(value, dict) and "type" not in value:
        return {"content": [{"type": "text", "text": json.dumps(value, default=str)}], "structuredContent": value}
    return {"content": [content_item(value)]}


def resource_contents(uri: str, value, mime_type: str | None) -> list[dict]:
    """Whatever a resource function returned -> the `contents` list of resources/read."""
    if isinstance(value, EmbeddedResource):
        return [value.contents()]
    if isinstance(value, dict) and "contents" in value:
        return value["contents"]
    if isinstance(value, (bytes, bytearray)):
        item = {"uri": uri, "blob": _b64(bytes(value))}
        item["mimeType"] = mime_type or "application/octet-stream"
        return [item]
    if isinstance(value, str):
        return [{"uri": uri, "mimeType": mime_type or "text/plain", "text": value}]
    if isinstance(value, list) and all(isinstance(v, EmbeddedResource) for v in value):
        return [v.contents() for v in value]
    if isinstance(value, BaseModel):
        return [{"uri": uri, "mimeType": mime_type or "application/json", "text": value.model_dump_json()}]
    return [{"uri": uri, "mimeType": mime_type or "application/json", "text": json.dumps(value, default=str)}]


def prompt_messages(value) -> list[dict]:
    if isinstance(value, (str, PromptMessage)) or (isinstance(value, dict) and "role" in value):
        value = [value]
    messages = []
    for item in value:
        if isinstance(item, PromptMessage):
            messages.append(item.to_dict())
        elif isinstance(item, dict) and "role" in item:
            messages.append({"role": item["role"], "content": content_item(item["content"])})
        else:
            messages.append({"role": "user", "content": content_item(item)})
    return messages

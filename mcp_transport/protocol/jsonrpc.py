"""JSON-RPC 2.0 messages as MCP uses them: parse, validate, build, serialize."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

# Every JSON-RPC error code this project sends, each with one meaning. Send them from here, by name.
# JSON-RPC 2.0's own.
PARSE_ERROR = -32700  # the body is not (strict, UTF-8) JSON
INVALID_REQUEST = -32600  # not a valid JSON-RPC request; also the body of the HTTP refusals (400, 403, 405...)
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603  # a handler failed, or the worker running the request stopped before it finished
# MCP's.
RESOURCE_NOT_FOUND = -32002  # resources/read of a URI the server does not have
URL_ELICITATION_REQUIRED = -32042  # for tools: the user must complete a URL elicitation first
# MCP 2026-07-28's (-32020..-32099 is the specification's).
HEADER_MISMATCH = -32020  # HTTP 400: Mcp-* headers missing, malformed, or not matching the body
MISSING_CLIENT_CAPABILITY = -32021  # HTTP 400: the request needs a capability the client did not declare
UNSUPPORTED_PROTOCOL_VERSION = -32022  # HTTP 400: data lists the supported versions and the requested one
# Server-defined (-32000..-32019).
SESSION_NOT_FOUND = -32001  # HTTP 404: unknown, expired or terminated Mcp-Session-Id (as the official SDK servers)
LIMIT_EXCEEDED = -32003  # a limit was hit: HTTP 429 for a request, or the error that ends a stream
CLIENT_ANSWER_TIMEOUT = -32004  # the client did not answer a server-to-client request in CLIENT_REQUEST_TIMEOUT
# Outside JSON-RPC's ranges, as LSP's RequestCancelled.
REQUEST_CANCELLED = -32800  # cancelled before it could answer (an operator; a client, for a JSON answer)


class JSONRPCError(Exception):
    """Raised by handlers: becomes a JSON-RPC error response."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self):
        error = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(JSONRPCError):
    def __init__(self, message="Parse error", data=None):
        super().__init__(PARSE_ERROR, message, data)


class InvalidRequest(JSONRPCError):
    def __init__(self, message="Invalid Request", data=None):
        super().__init__(INVALID_REQUEST, message, data)


class MethodNotFound(JSONRPCError):
    def __init__(self, method: str):
        super().__init__(METHOD_NOT_FOUND, f"Method not found: {method}")


class InvalidParams(JSONRPCError):
    def __init__(self, message="Invalid params", data=None):
        super().__init__(INVALID_PARAMS, message, data)


@dataclass
class Message:
    """A validated incoming message. `kind` is request, notification or response."""

    kind: str
    raw: dict
    id: Any = None
    method: str | None = None
    params: dict | None = None

    @property
    def is_request(self):
        return self.kind == "request"

    @property
    def meta(self) -> dict:
        meta = (self.params or {}).get("_meta")
        return meta if isinstance(meta, dict) else {}


def _valid_id(value) -> bool:
    return (isinstance(value, str) or isinstance(value, int)) and not isinstance(value, bool)


# How deep a message may nest. Python's parser stops only at the interpreter's recursion limit,
# less the stack under it: a message just below that parsed, then failed (RecursionError, a 500) where
# it was serialized again on a deeper stack (request-state digests and signing, stored answers).
MAX_DEPTH = 512


def json_depth(value) -> int:
    """How deeply a JSON value nests (a scalar 0, `{}` and `[]` 1), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def parse(body: bytes) -> Message:
    """Bytes -> Message, raising ParseError / InvalidRequest with a precise message."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError("Parse error: body is not valid UTF-8") from None
    try:
        data = _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"Parse error: {exc}") from None
    # Only a body with that many brackets can nest that deep: others are not walked.
    if text.count("[") + text.count("{") > MAX_DEPTH and json_depth(data) > MAX_DEPTH:
        raise ParseError(f"Parse error: nested deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ParseError("Parse error: a string holds an unpaired UTF-16 surrogate") from None
    return validate(data)


# Only bodies with \uD800-\uDFFF escapes can decode to unpaired surrogates; only those are checked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number out of range: {text[:40]}")
    return value


# Built once: json.loads / json.dumps with options build a new decoder / encoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=str)


def validate(data) -> Message:
    if isinstance(data, list):
        raise InvalidRequest("Invalid Request: batch requests are not supported")
    if not isinstance(data, dict):
        raise InvalidRequest("Invalid Request: a JSON-RPC message must be an object")
    if data.get("jsonrpc") != "2.0":
        raise InvalidRequest('Invalid Request: "jsonrpc" must be "2.0"')
    if "method" in data:
        method = data["method"]
        if not isinstance(method, str) or not method:
            raise InvalidRequest('Invalid Request: "method" must be a non-empty string')
        params = data.get("params")
        if params is not None and not isinstance(params, dict):
            raise InvalidRequest('Invalid Request: "params" must be an object')
        if "id" in data:
            if not _valid_id(data["id"]):
                raise InvalidRequest('Invalid Request: "id" must be a string or an integer')
            return Message("request", data, data["id"], method, params)
        return Message("notification", data, None, method, params)
    if "result" in data or "error" in data:
        if "result" in data and "error" in data:
            raise InvalidRequest("Invalid Request: a response has either result or error")
        if not _valid_id(data.get("id")) and not ("error" in data and data.get("id") is None):
            raise InvalidRequest('Invalid Request: "id" must be a string or an integer')
        if "error" in data and not isinstance(data["error"], dict):
            raise InvalidRequest('Invalid Request: "error" must be an object')
        return Message("response", data, data.get("id"))
    raise InvalidRequest('Invalid Request: neither "method" nor "result"/"error"')


def dumps(obj) -> str:
    """Compact and ASCII-only: whatever a tool returns (unpaired surrogates, U+2028, NaN) stays
    valid JSON on one SSE line and encodes to UTF-8."""
    try:
        return _ENCODER.encode(obj)
    except ValueError:
        return _ENCODER.encode(_finite(obj))


def _finite(value):
    """NaN and infinities (which JSON cannot carry) become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def result(id, result) -> dict:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error(id, code: int, message: str, data=None) -> dict:
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": err}


def error_from(id, exc: JSONRPCError) -> dict:
    return {"jsonrpc": "2.0", "id": id, "error": exc.to_dict()}


def notification(method: str, params: dict | None = None) -> dict:
    msg = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def request(id, method: str, params: dict | None = None) -> dict:
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg

"""2026-07-28 requests over HTTP: which requests are modern, their headers, and their answers.

A request is modern when its body says so (`params._meta` carries the protocol version), or,
without that key, when it names no session and its `MCP-Protocol-Version` header is not one
of the session-era versions (it then gets the modern path's errors, never a legacy one). Every
other request, and `initialize` always, goes the session way, unchanged.

A modern request is answered with one JSON body when it finishes before it has anything else
to say, and with an SSE stream (no event ids: nothing is resumable) as soon as it sends a
notification or has been running for KEEPALIVE_SECONDS, when a comment keeps proxies from
timing the connection out. Closing the connection cancels the request.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import math

from .. import tracing
from ..conf import mcp_settings
from ..execution.modern import ENDED
from ..limits import LimitExceeded
from ..execution.worker import worker
from ..protocol import jsonrpc, modern
from ..protocol.context import GRANTED_SCOPES
from ..protocol.dispatch import SUPPORTED_VERSIONS as LEGACY_VERSIONS
from ..protocol.jsonrpc import JSONRPCError
from ..protocol.mrtr import Inputs
from . import sse
from .guards import Rejected, too_many

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]
# Notifications a request may have queued for a slow client before its tool waits.
MAX_QUEUED = 256
BASE64_PREFIX, BASE64_SUFFIX = "=?base64?", "?="


def is_modern(message: jsonrpc.Message, headers: dict[str, str]) -> bool:
    eras = mcp_settings.PROTOCOL_ERAS
    if "modern" not in eras:
        return False
    if "legacy" not in eras:
        return True
    if modern.VERSION_KEY in message.meta:
        return True
    if message.method == "initialize" or "mcp-session-id" in headers:
        return False
    version = headers.get("mcp-protocol-version")
    return version is not None and version.strip() not in LEGACY_VERSIONS


def is_modern_get(headers: dict[str, str]) -> bool:
    """A GET or DELETE from a modern client (it has no session): 405, there is no such thing."""
    eras = mcp_settings.PROTOCOL_ERAS
    if "legacy" not in eras:
        return True
    version = (headers.get("mcp-protocol-version") or "").strip()
    return "modern" in eras and "mcp-session-id" not in headers and version in modern.MODERN_VERSIONS


class Mismatch(JSONRPCError):
    def __init__(self, message: str):
        super().__init__(jsonrpc.HEADER_MISMATCH, f"Header mismatch: {message}")


def decode_header(name: str, value: str) -> str:
    """A header value as the client meant it: plain visible ASCII, or the base64 sentinel form."""
    if value.startswith(BASE64_PREFIX) and value.endswith(BASE64_SUFFIX) and len(value) >= 11:
        try:
            return base64.b64decode(value[len(BASE64_PREFIX):-len(BASE64_SUFFIX)], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise Mismatch(f"{name} is not valid base64 of UTF-8 text") from None
    if any(not (" " <= ch <= "~" or ch == "\t") for ch in value):
        raise Mismatch(f"{name} holds characters a header cannot carry; use the {BASE64_PREFIX}...?= form")
    return value


def _same(header: str, value) -> bool:
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, int) or isinstance(value, float) and value.is_integer():
        try:
            number = float(header)
        except ValueError:
            return False
        return math.isfinite(number) and number == value
    return isinstance(value, str) and header == value


def check_headers(headers: dict[str, str], message: jsonrpc.Message, meta: modern.RequestMeta, server):
    """The headers mirror the body (so intermediaries can route on them): -32020 when they do not."""
    version = headers.get("mcp-protocol-version")
    if version is None:
        raise Mismatch("the MCP-Protocol-Version header is required")
    if version.strip() != meta.version:
        raise Mismatch(f"MCP-Protocol-Version {version.strip()!r} does not match the body's {meta.version!r}")
    method = headers.get("mcp-method")
    if method is None:
        raise Mismatch("the Mcp-Method header is required")
    if method.strip() != message.method:
        raise Mismatch(f"Mcp-Method {method.strip()!r} does not match the body's {message.method!r}")
    params = message.params or {}
    target = modern.NAMED.get(message.method)
    if target is None:
        return
    name = headers.get("mcp-name")
    if name is None:
        raise Mismatch(f"the Mcp-Name header is required for {message.method}")
    name = decode_header("Mcp-Name", name.strip())
    if name != params.get(target):
        raise Mismatch(f"Mcp-Name {name!r} does not match the body's {target} {params.get(target)!r}")
    if message.method == "tools/call":
        tool = server.tools.get(name)
        if tool is not None and tool.header_params:
            check_param_headers(headers, tool, params.get("arguments"))


def check_param_headers(headers: dict[str, str], tool, arguments):
    for path, header_name in tool.header_params:
        value = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        header = headers.get(f"mcp-param-{header_name.lower()}")
        if value is None:
            continue
        if header is None:
            raise Mismatch(f"the Mcp-Param-{header_name} header is required when {'.'.join(path)} is given")
        if not _same(decode_header(f"Mcp-Param-{header_name}", header.strip()), value):
            raise Mismatch(f"Mcp-Param-{header_name} does not match the body's {'.'.join(path)}")


class ModernPost:
    """One modern POST, from its checks to its answer."""

    def __init__(self, endpoint, message: jsonrpc.Message, json_only: bool = False):
        self.endpoint = endpoint
        self.message = message
        self.server = endpoint.server
        # JSON_RESPONSE, or a client that does not accept SSE: one JSON body, notifications dropped.
        self.json_only = json_only

    async def answer(self):
        endpoint, message = self.endpoint, self.message
        if message.kind == "notification":
            with tracing.notification(message.method, message.params, scope=endpoint.scope,
                                      protocol_version=endpoint.headers.get("mcp-protocol-version")):
                pass  # nothing a 2026-07-28 client notifies needs an action here
            await endpoint.send_json(202, None)
            return
        if message.kind == "response":
            await endpoint.send_json(400, jsonrpc.error(message.id, jsonrpc.INVALID_REQUEST,
                                                        "Invalid Request: 2026-07-28 clients send no responses"))
            return
        try:
            if message.method == "initialize" and modern.VERSION_KEY not in message.meta:
                raise modern.unsupported_version((message.params or {}).get("protocolVersion"))
            meta = modern.RequestMeta.of(message.params)
            check_headers(endpoint.headers, message, meta, self.server)
            meta.check_version()
            if not self.server.modern.knows(message.method):
                raise jsonrpc.MethodNotFound(message.method)
            endpoint.check_scopes(message)
            params = message.params or {}
            if message.method == "subscriptions/listen":
                agreed = modern.listen_filter(params, self.server, meta.capabilities)
            elif message.method in modern.INPUT_METHODS:
                inputs = Inputs.from_request(endpoint.principal_id, message.method, params)
            else:
                inputs = None
        except JSONRPCError as exc:
            status = modern.http_status(exc.code)
            await endpoint.send_json(400 if status == 200 else status, jsonrpc.error_from(message.id, exc))
            return
        except Rejected as exc:
            await endpoint.reject(exc, message.id)
            return
        if message.method == "subscriptions/listen" and self.json_only:
            await endpoint.send_json(406, jsonrpc.error(message.id, jsonrpc.INVALID_REQUEST,
                                     "Not Acceptable: subscriptions/listen answers with text/event-stream"))
            return
        try:
            ticket = worker.modern.admit(endpoint.principal_id)
        except LimitExceeded as exc:
            await endpoint.reject(too_many(exc), message.id)
            return
        if message.method == "subscriptions/listen":
            await self.listen(agreed, meta, ticket)
        elif not self.server.dispatcher.streams(message.method):
            await self.answer_now(meta, inputs, ticket)
        else:
            endpoint.pump = asyncio.ensure_future(self.call(meta, inputs, ticket))
            endpoint.pump.add_done_callback(ticket.release)

    async def answer_now(self, meta, inputs, ticket):
        """A request that sends no notifications (a list, discovery, a task poll): one JSON body,
        awaited here, without the streaming machinery a call needs."""
        try:
            payload = await worker.modern.run(self.server, self.message, self.endpoint.scope, meta, inputs,
                                              _no_notifications, self.endpoint.principal_id, ticket)
        finally:
            ticket.release()
        error = payload.get("error")
        await self.endpoint.send_json(modern.http_status(error["code"]) if error else 200, payload)

    async def call(self, meta, inputs, ticket):
        endpoint = self.endpoint
        queued: list[dict] = []
        wake = asyncio.Event()
        drained = asyncio.Event()

        async def emit(message: dict):
            if self.json_only:
                return
            queued.append(message)
            wake.set()
            if len(queued) >= MAX_QUEUED:
                drained.clear()
                await drained.wait()

        task = asyncio.ensure_future(worker.modern.run(
            self.server, self.message, endpoint.scope, meta, inputs, emit, endpoint.principal_id, ticket))
        task.add_done_callback(lambda _: wake.set())
        keepalive = None if self.json_only else float(mcp_settings.KEEPALIVE_SECONDS)
        streaming = False
        try:
            while True:
                if not queued and not task.done():
                    try:
                        async with asyncio.timeout(keepalive):
                            await wake.wait()
                    except TimeoutError:
                        if not streaming:
                            streaming = True
                            await endpoint.send_headers(200, SSE_HEADERS)
                        await endpoint.send_body(sse.KEEPALIVE, more_body=True)
                        continue
                wake.clear()
                if task.done() and not queued and not streaming:
                    payload = task.result()
                    error = payload.get("error")
                    await endpoint.send_json(modern.http_status(error["code"]) if error else 200, payload)
                    return
                if queued:
                    if not streaming:
                        streaming = True
                        await endpoint.send_headers(200, SSE_HEADERS)
                    batch, queued[:] = list(queued), []
                    drained.set()
                    await endpoint.send_body(b"".join(sse.event(None, jsonrpc.dumps(m)) for m in batch),
                                             more_body=True)
                if task.done() and not queued:
                    await endpoint.send_body(sse.event(None, jsonrpc.dumps(task.result())))
                    return
        finally:
            if not task.done():
                task.cancel()

    async def listen(self, agreed: dict, meta, ticket):
        endpoint, listen_id = self.endpoint, self.message.id
        if "taskIds" in agreed:
            try:
                agreed["taskIds"] = await worker.tasks.visible(self.server, endpoint.principal_id,
                                                               endpoint.scope.get(GRANTED_SCOPES), agreed["taskIds"])
            except BaseException:
                ticket.release()
                raise
        listen = worker.modern.open_listen(self.server.name, listen_id, agreed, endpoint.principal_id, meta, ticket)
        ack = modern.on_listen(listen_id, "notifications/subscriptions/acknowledged", {"notifications": agreed})
        try:
            await endpoint.send_headers(200, SSE_HEADERS)
            await endpoint.send_body(sse.event(None, jsonrpc.dumps(ack)), more_body=True)
        except BaseException:
            worker.modern.close_listen(listen)
            raise
        endpoint.pump = asyncio.ensure_future(self.pump_listen(listen))
        # Also when the pump is cancelled before it ever ran (a disconnect at once): no finally runs then.
        endpoint.pump.add_done_callback(lambda _: worker.modern.close_listen(listen))

    async def pump_listen(self, listen):
        endpoint = self.endpoint
        keepalive = float(mcp_settings.KEEPALIVE_SECONDS)
        try:
            while True:
                try:
                    async with asyncio.timeout(keepalive):
                        item = await listen.queue.get()
                except TimeoutError:
                    await endpoint.send_body(sse.KEEPALIVE, more_body=True)
                    continue
                if item is ENDED:
                    await endpoint.send_body(sse.event(None, jsonrpc.dumps(modern.listen_ended(listen.listen_id))))
                    return
                listen.sent += 1
                await endpoint.send_body(sse.event(None, jsonrpc.dumps(item)), more_body=True)
        finally:
            worker.modern.close_listen(listen)


async def _no_notifications(message: dict):
    """What a non-streaming request logs goes nowhere, as under JSON_RESPONSE."""

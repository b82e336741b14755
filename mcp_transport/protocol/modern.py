"""MCP revision 2026-07-28 ("modern"): stateless requests that carry their own `_meta`.

Each request says which revision it speaks, what the client can do and who the client is, in
`params._meta`; nothing is remembered between requests. The same registry and the same
handlers serve it as the 2025-11-25 sessions: what differs is the request's envelope (checked
here), the result's (`resultType`, `serverInfo`, caching hints), a few methods (no `ping`, no
`logging/setLevel`, no `resources/subscribe`; `server/discover`), and how a tool's questions
reach the client (`mrtr`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..conf import mcp_settings
from . import jsonrpc
from .context import LOG_LEVELS, Context
from .dispatch import Dispatcher
from .jsonrpc import InvalidParams, JSONRPCError, MethodNotFound
from . import tasks
from .mrtr import InputRequired

MODERN_VERSIONS = ("2026-07-28",)
PREFIX = "io.modelcontextprotocol/"
VERSION_KEY = PREFIX + "protocolVersion"
CAPABILITIES_KEY = PREFIX + "clientCapabilities"
CLIENT_INFO_KEY = PREFIX + "clientInfo"
LOG_LEVEL_KEY = PREFIX + "logLevel"
SERVER_INFO_KEY = PREFIX + "serverInfo"
SUBSCRIPTION_KEY = PREFIX + "subscriptionId"
# The methods that may answer with `input_required`, and the param their Mcp-Name header mirrors.
INPUT_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
NAMED = {**INPUT_METHODS, **{method: "taskId" for method in tasks.METHODS}}
CACHEABLE = ("server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list",
             "resources/read")


def unsupported_version(requested) -> JSONRPCError:
    """Lists what a 2026-07-28-style request may ask for (the session-era versions need initialize)."""
    supported = list(MODERN_VERSIONS)
    return JSONRPCError(jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                        {"supported": supported, "requested": requested if isinstance(requested, str) else str(requested)})


@dataclass(frozen=True)
class RequestMeta:
    """What a modern request says about itself."""

    version: str
    capabilities: dict
    client_info: dict | None
    log_level: str | None

    @classmethod
    def of(cls, params: dict | None) -> "RequestMeta":
        """Raises -32602 for a malformed envelope. Whether its version is served is `check_version`'s
        business, after the headers were compared with it."""
        meta = (params or {}).get("_meta")
        if not isinstance(meta, dict) or VERSION_KEY not in meta:
            raise InvalidParams(f"Invalid params: _meta must carry {VERSION_KEY}")
        version = meta[VERSION_KEY]
        if not isinstance(version, str):
            raise InvalidParams(f"Invalid params: {VERSION_KEY} must be a string")
        capabilities = meta.get(CAPABILITIES_KEY)
        if not isinstance(capabilities, dict):
            raise InvalidParams(f"Invalid params: _meta must carry {CAPABILITIES_KEY} (an object)")
        client_info = meta.get(CLIENT_INFO_KEY)
        if client_info is not None and not isinstance(client_info, dict):
            raise InvalidParams(f"Invalid params: {CLIENT_INFO_KEY} must be an object")
        log_level = meta.get(LOG_LEVEL_KEY)
        if log_level is not None and log_level not in LOG_LEVELS:
            raise InvalidParams(f"Invalid params: {LOG_LEVEL_KEY} must be one of {', '.join(LOG_LEVELS)}")
        return cls(version, capabilities, client_info, log_level)

    def check_version(self):
        """-32022 for a revision this endpoint does not serve."""
        if self.version not in MODERN_VERSIONS:
            raise unsupported_version(self.version)


def http_status(error_code: int) -> int:
    """The HTTP status of a modern request answered with this JSON-RPC error."""
    if error_code == jsonrpc.METHOD_NOT_FOUND:
        return 404
    if error_code in (jsonrpc.HEADER_MISMATCH, jsonrpc.MISSING_CLIENT_CAPABILITY,
                      jsonrpc.UNSUPPORTED_PROTOCOL_VERSION):
        return 400
    return 200


class ModernDispatcher:
    """The 2026-07-28 methods, on the server's own handlers."""

    def __init__(self, server, legacy: Dispatcher):
        self.server = server
        self.legacy = legacy
        self.handlers = {
            "server/discover": self.discover,
            "tools/list": legacy.tools_list,
            "tools/call": legacy.tools_call,
            "resources/list": legacy.resources_list,
            "resources/templates/list": legacy.resource_templates_list,
            "resources/read": self.resources_read,
            "prompts/list": legacy.prompts_list,
            "prompts/get": legacy.prompts_get,
            "completion/complete": legacy.completion_complete,
        }

    def knows(self, method: str) -> bool:
        return method in self.handlers or method == "subscriptions/listen" or method in tasks.METHODS

    def capabilities(self) -> dict:
        return {**self.legacy.capabilities(), "extensions": {tasks.EXTENSION: {}}}

    async def handle(self, method: str, params: dict, ctx: Context) -> dict:
        handler = self.handlers.get(method)
        if handler is None:
            raise MethodNotFound(method)
        try:
            result = await handler(params, ctx)
        except InputRequired as asked:
            if method not in INPUT_METHODS:
                raise JSONRPCError(jsonrpc.INTERNAL_ERROR, f"{method} cannot ask the client for input") from None
            return asked.result()
        return self.complete(method, result, ctx)

    def complete(self, method: str, result: dict, ctx: Context | None = None) -> dict:
        result = {"resultType": "complete", **result}
        meta = result.get("_meta")
        result["_meta"] = {**meta, SERVER_INFO_KEY: self.server.info()} if isinstance(meta, dict) else {
            SERVER_INFO_KEY: self.server.info()}
        if method in CACHEABLE:
            result.update(self.caching(method, ctx))
        return result

    def caching(self, method: str, ctx: Context | None) -> dict:
        """`ttlMs` and `cacheScope`. Lists and discovery live CACHE_TTL_MS, a read 0, an MRTR retry 0;
        private where the answer depends on who asks: a list some items of which need permissions or
        scopes, a guarded, scoped or context-taking resource (discovery is the same for everyone)."""
        retried = ctx is not None and ("requestState" in ctx.params or "inputResponses" in ctx.params)
        if method == "resources/read":
            resource, _ = self.server.find_resource(ctx.params.get("uri", "")) if ctx else (None, None)
            private = (resource is None or resource.restricted or _scoped(resource)
                       or resource.signature.context_param is not None)
            return {"ttlMs": 0, "cacheScope": "private" if private else "public"}
        ttl = 0 if retried else max(0, int(mcp_settings.CACHE_TTL_MS))
        if method == "server/discover":
            return {"ttlMs": ttl, "cacheScope": "public"}
        registry = {"tools/list": self.server.tools, "prompts/list": self.server.prompts}.get(
            method, self.server.resources)
        return {"ttlMs": ttl, "cacheScope": "private" if any(i.restricted or _scoped(i) for i in registry.values())
                else "public"}

    async def discover(self, params, ctx):
        result = {"supportedVersions": list(MODERN_VERSIONS), "capabilities": self.capabilities()}
        if self.server.instructions:
            result["instructions"] = self.server.instructions
        return result

    async def resources_read(self, params, ctx):
        try:
            return await self.legacy.resources_read(params, ctx)
        except JSONRPCError as exc:
            if exc.code == jsonrpc.RESOURCE_NOT_FOUND:
                raise InvalidParams(exc.message, exc.data) from None
            raise


def listen_filter(params: dict, server, capabilities: dict | None = None) -> dict:
    """The notifications a `subscriptions/listen` asks for, cut to what this server sends. Its
    `taskIds` are what was asked: the execution layer keeps those of the caller's tasks."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise InvalidParams("Invalid params: 'notifications' must be an object")
    agreed = {}
    for key in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
        value = wanted.get(key)
        if value is not None and not isinstance(value, bool):
            raise InvalidParams(f"Invalid params: notifications.{key} must be a boolean")
        if value:
            agreed[key] = True
    uris = wanted.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(u, str) and u and "\x00" not in u for u in uris):
            raise InvalidParams("Invalid params: notifications.resourceSubscriptions must be a list of URIs")
        agreed["resourceSubscriptions"] = list(dict.fromkeys(uris))
    if wanted.get("taskIds") is not None:
        agreed["taskIds"] = tasks.listen_task_ids(wanted["taskIds"], capabilities or {})
    return agreed


LISTEN_KEYS = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}


def wants(agreed: dict, method: str, params: dict | None) -> bool:
    """Whether a listen stream with this filter gets this notification."""
    if method == "notifications/resources/updated":
        return (params or {}).get("uri") in agreed.get("resourceSubscriptions", ())
    if method == tasks.NOTIFICATION:
        return (params or {}).get("taskId") in agreed.get("taskIds", ())
    key = LISTEN_KEYS.get(method)
    return key is not None and bool(agreed.get(key))


def on_listen(listen_id, method: str, params: dict | None = None) -> dict:
    """A notification (or the acknowledgement) as it goes out on one listen stream."""
    return jsonrpc.notification(method, {**(params or {}), "_meta": {SUBSCRIPTION_KEY: listen_id}})


def listen_ended(listen_id) -> dict:
    return jsonrpc.result(listen_id, {"resultType": "complete", "_meta": {SUBSCRIPTION_KEY: listen_id}})


def _scoped(item) -> bool:
    """Whether callers' scopes decide if they see the item (never without authentication)."""
    return bool(item.scopes and mcp_settings.AUTH_BACKENDS)

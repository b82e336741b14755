"""Method -> handler: initialize and version negotiation, capabilities, the MCP methods."""
from __future__ import annotations

from . import jsonrpc
from .content import ResourceNotFound, prompt_messages, resource_contents
from .context import LOG_LEVELS, Context
from .jsonrpc import InvalidParams, JSONRPCError, MethodNotFound, json_depth
from .registry import ArgumentsError, call_tool
from .tasks import SESSION_CAPABILITY

SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_VERSION = SUPPORTED_VERSIONS[0]
# Sessions on this revision or later get priming events and may be disconnected early (SEP-1699).
POLLING_VERSION = "2025-11-25"
# A request without MCP-Protocol-Version comes from a 2025-03-26 client.
DEFAULT_HEADER_VERSION = "2025-03-26"
# Methods whose handlers may talk to the client before answering get an SSE stream;
# the others are answered with one JSON body (a choice the spec leaves to the server).
STREAMING_METHODS = frozenset({"tools/call", "prompts/get", "resources/read", "tasks/result"})
COMPLETION_LIMIT = 100
# How deep what a session keeps as JSON (its client capabilities) may nest, the object itself
# counted: MariaDB's JSON_VALID (the check on a JSONField there) refuses 32 levels.
MAX_KEPT_DEPTH = 31


def negotiate(requested) -> str:
    return requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION


def _require_str(params: dict, key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidParams(f"Invalid params: '{key}' must be a non-empty string")
    return value


def holds_nul(value) -> bool:
    """Whether a JSON value has a NUL character in any string or key: what the session keeps
    must be storable on every database (PostgreSQL's text and jsonb hold none). Without
    recursion: a client may nest as deep as the parser allows."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _kept_str(params: dict, key: str) -> str:
    """A non-empty string the session keeps (a subscription's URI)."""
    value = _require_str(params, key)
    if "\x00" in value:
        raise InvalidParams(f"Invalid params: '{key}' must not contain NUL characters")
    return value


async def visible(items, ctx: Context) -> list:
    """The items this request's caller may see (its token's scopes, its user's permissions);
    permission checks run where blocking code runs."""
    granted = ctx.granted_scopes
    items = [item for item in items if not item.missing_scopes(granted)]
    if not any(item.restricted for item in items):
        return items
    user = ctx.user
    return await ctx.host.run_sync(lambda: [item for item in items if item.allowed(user)])


async def permitted(item, ctx: Context) -> bool:
    if item is None or item.missing_scopes(ctx.granted_scopes):
        return False
    return not item.restricted or await ctx.host.run_sync(item.allowed, ctx.user)


def scoped_target(server, method: str, params):
    """The tool, prompt or resource a request uses, when it needs scopes (else None): the
    endpoint refuses a token without them (403 insufficient_scope) before anything runs."""
    if not isinstance(params, dict):
        return None
    item = None
    if method == "tools/call":
        item = server.tools.get(params.get("name")) if isinstance(params.get("name"), str) else None
    elif method == "prompts/get":
        item = server.prompts.get(params.get("name")) if isinstance(params.get("name"), str) else None
    elif method in ("resources/read", "resources/subscribe"):
        item = server.find_resource(params["uri"])[0] if isinstance(params.get("uri"), str) else None
    elif method == "completion/complete":
        ref = params.get("ref")
        if isinstance(ref, dict) and ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            item = server.prompts.get(ref["name"])
        elif isinstance(ref, dict) and ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
            item = server.resources.get(ref["uri"])
    return item if item is not None and item.scopes else None


async def _named(registry: dict, params: dict, what: str, ctx: Context):
    """The tool or prompt named in params (if this user may use it), and its `arguments` object.

    A hidden item is unknown, not forbidden: its existence is not disclosed.
    """
    name = _require_str(params, "name")
    item = registry.get(name)
    if not await permitted(item, ctx):
        raise InvalidParams(f"Unknown {what}: {name}")
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise InvalidParams("Invalid params: 'arguments' must be an object")
    return item, arguments


def _no_cursor(params: dict):
    if params.get("cursor") is not None:
        raise InvalidParams("Invalid params: unknown cursor")


class Dispatcher:
    def __init__(self, server):
        self.server = server
        self.handlers = {
            "ping": self.ping,
            "tools/list": self.tools_list,
            "tools/call": self.tools_call,
            "resources/list": self.resources_list,
            "resources/templates/list": self.resource_templates_list,
            "resources/read": self.resources_read,
            "resources/subscribe": self.resources_subscribe,
            "resources/unsubscribe": self.resources_unsubscribe,
            "prompts/list": self.prompts_list,
            "prompts/get": self.prompts_get,
            "completion/complete": self.completion_complete,
            "logging/setLevel": self.logging_set_level,
        }

    def capabilities(self) -> dict:
        caps = {"logging": {}, "completions": {}, "tools": {"listChanged": True}}
        if self.server.resources:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self.server.prompts:
            caps["prompts"] = {"listChanged": True}
        return caps

    def initialize(self, params: dict) -> tuple[dict, str]:
        """Validate `initialize` params; return the result and the negotiated version."""
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise InvalidParams("Invalid params: 'protocolVersion' must be a string")
        for key in ("capabilities", "clientInfo"):
            if key in params and not isinstance(params[key], dict):
                raise InvalidParams(f"Invalid params: '{key}' must be an object")
            if holds_nul(params.get(key)):
                raise InvalidParams(f"Invalid params: '{key}' must not contain NUL characters")
            if json_depth(params.get(key)) > MAX_KEPT_DEPTH:
                raise InvalidParams(f"Invalid params: '{key}' nests deeper than {MAX_KEPT_DEPTH} levels")
        version = negotiate(requested)
        result = {
            "protocolVersion": version,
            "capabilities": {**self.capabilities(), "tasks": SESSION_CAPABILITY},
            "serverInfo": self.server.info(),
        }
        if self.server.instructions:
            result["instructions"] = self.server.instructions
        return result, version

    def streams(self, method: str) -> bool:
        return method in STREAMING_METHODS

    async def handle(self, method: str, params: dict, ctx: Context) -> dict:
        handler = self.handlers.get(method)
        if handler is None:
            raise MethodNotFound(method)
        return await handler(params, ctx)

    async def ping(self, params, ctx):
        return {}

    async def tools_list(self, params, ctx):
        _no_cursor(params)
        tools = await visible(self.server.tools.values(), ctx)
        if ctx.modern is not None:
            return {"tools": [t.definition() for t in tools]}
        return {"tools": [{**t.definition(), "execution": {"taskSupport": t.task_support}}
                          if t.task_support != "forbidden" else t.definition() for t in tools]}

    async def tools_call(self, params, ctx):
        tool, arguments = await _named(self.server.tools, params, "tool", ctx)
        return await call_tool(tool, arguments, ctx)

    async def resources_list(self, params, ctx):
        _no_cursor(params)
        resources = await visible(self.server.resources.values(), ctx)
        return {"resources": [r.definition() for r in resources if not r.is_template]}

    async def resource_templates_list(self, params, ctx):
        _no_cursor(params)
        resources = await visible(self.server.resources.values(), ctx)
        return {"resourceTemplates": [r.definition() for r in resources if r.is_template]}

    async def resources_read(self, params, ctx):
        uri = _require_str(params, "uri")
        resource, args = self.server.find_resource(uri)
        if not await permitted(resource, ctx):
            raise JSONRPCError(jsonrpc.RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})
        kwargs = resource.signature.bind(args)
        try:
            value = await resource.signature.call(resource.fn, kwargs, ctx)
        except ResourceNotFound as exc:
            raise JSONRPCError(jsonrpc.RESOURCE_NOT_FOUND, str(exc) or f"Resource not found: {uri}",
                               {"uri": uri}) from None
        return {"contents": resource_contents(uri, value, resource.mime_type)}

    async def resources_subscribe(self, params, ctx):
        await ctx.host.subscribe(_kept_str(params, "uri"))
        return {}

    async def resources_unsubscribe(self, params, ctx):
        await ctx.host.unsubscribe(_kept_str(params, "uri"))
        return {}

    async def prompts_list(self, params, ctx):
        _no_cursor(params)
        return {"prompts": [p.definition() for p in await visible(self.server.prompts.values(), ctx)]}

    async def prompts_get(self, params, ctx):
        prompt, arguments = await _named(self.server.prompts, params, "prompt", ctx)
        kwargs = prompt.signature.bind(arguments)
        value = await prompt.signature.call(prompt.fn, kwargs, ctx)
        result = {"messages": prompt_messages(value)}
        if prompt.description:
            result["description"] = prompt.description
        return result

    async def completion_complete(self, params, ctx):
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise InvalidParams("Invalid params: 'ref' and 'argument' must be objects")
        arg_name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(arg_name, str) or not isinstance(value, str):
            raise InvalidParams("Invalid params: argument 'name' and 'value' must be strings")
        ref_type = ref.get("type")
        key = {"ref/prompt": "name", "ref/resource": "uri"}.get(ref_type) if isinstance(ref_type, str) else None
        if key is None:
            raise InvalidParams("Invalid params: ref.type must be ref/prompt or ref/resource")
        name = ref.get(key)
        if not isinstance(name, str):
            raise InvalidParams(f"Invalid params: ref.{key} must be a string")
        target = (self.server.prompts if key == "name" else self.server.resources).get(name)
        if not await permitted(target, ctx):
            raise InvalidParams(f"Unknown {'prompt' if key == 'name' else 'resource template'}: {name}")
        context = params.get("context")
        context_args = context.get("arguments") if isinstance(context, dict) else None
        if context is not None and not isinstance(context, dict) or (
            context_args is not None and not isinstance(context_args, dict)
        ):
            raise InvalidParams("Invalid params: 'context' must be an object with an 'arguments' object")
        context_args = context_args or {}
        completer = target.completions.get(arg_name)
        values = []
        if completer is not None:
            values = list(await _maybe_await(completer(value, context_args)))
        completion = {"values": [str(v) for v in values[:COMPLETION_LIMIT]], "total": len(values),
                      "hasMore": len(values) > COMPLETION_LIMIT}
        return {"completion": completion}

    async def logging_set_level(self, params, ctx):
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams(f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}")
        await ctx.host.set_log_level(level)
        return {}


async def _maybe_await(value):
    if hasattr(value, "__await__"):
        return await value
    return value


__all__ = ["Dispatcher", "negotiate", "SUPPORTED_VERSIONS", "LATEST_VERSION", "ArgumentsError"]

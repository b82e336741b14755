"""Tools, resources and prompts declared with decorators; schemas and validation by pydantic."""
from __future__ import annotations

import inspect
import json
import logging
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Callable

from asgiref.sync import sync_to_async
from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from . import content
from .context import Context, SyncContext
from .jsonrpc import InvalidParams, JSONRPCError
from .tasks import TASK_SUPPORT

logger = logging.getLogger("mcp_transport")


@dataclass
class Signature:
    """A function's parameters as a pydantic model, minus the context parameter."""

    model: type[BaseModel]
    context_param: str | None
    is_async: bool

    @classmethod
    def of(cls, fn: Callable, name: str) -> "Signature":
        hints = typing.get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        context_param = None
        for param in inspect.signature(fn).parameters.values():
            annotation = hints.get(param.name, Any)
            if inspect.isclass(annotation) and issubclass(annotation, (Context, SyncContext)):
                context_param = param.name
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (annotation, default)
        model = create_model(
            f"{_camel(name)}Arguments",
            __config__=ConfigDict(arbitrary_types_allowed=True, extra="ignore"),
            **fields,
        )
        return cls(model, context_param, inspect.iscoroutinefunction(fn))

    def schema(self) -> dict:
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    def bind(self, arguments: dict | None) -> dict:
        try:
            parsed = self.model.__pydantic_validator__.validate_python(arguments or {})
        except ValidationError as exc:
            raise ArgumentsError(exc) from None
        # extra="ignore": the instance holds exactly the fields. (model_validate, then a getattr
        # per field, took four times as long.)
        return dict(parsed.__dict__)

    async def call(self, fn: Callable, kwargs: dict, ctx: Context | None):
        if self.is_async:
            if self.context_param:
                kwargs[self.context_param] = ctx
            return await fn(**kwargs)
        if self.context_param:
            kwargs[self.context_param] = SyncContext(ctx)
        return await sync_to_async(_call_with_db, thread_sensitive=False)(fn, kwargs)


def _call_with_db(fn, kwargs):
    """Sync functions run in a worker thread; give them the ORM like a Django request would."""
    from django.db import close_old_connections

    close_old_connections()
    try:
        return fn(**kwargs)
    finally:
        close_old_connections()


class ArgumentsError(InvalidParams):
    def __init__(self, exc: ValidationError):
        errors = [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors(include_url=False)
        ]
        summary = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in errors)
        super().__init__(f"Invalid arguments: {summary}", {"errors": errors})


class OutputMismatch(Exception):
    """A tool's structured result does not match its output schema (a bug in the tool)."""


@dataclass(frozen=True)
class Output:
    """What a tool's structured result must look like (`outputSchema`), and how it is checked.

    From the return annotation: a pydantic model, a dict or TypedDict, or a type whose values are
    not objects (an int, a list of floats...), which the result carries as `{"result": value}`.
    A `-> str` tool answers text only. Or declared: `@mcp.tool(output_schema={...})`.
    """

    schema: dict
    adapter: TypeAdapter | None = None
    wrapped: bool = False

    @classmethod
    def of(cls, annotation) -> "Output | None":
        if annotation in (inspect.Parameter.empty, None, type(None), str, Any, list, tuple, dict):
            return None
        if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
            return cls(annotation.model_json_schema(), TypeAdapter(annotation))
        try:
            adapter = TypeAdapter(annotation)
            schema = adapter.json_schema()
        except Exception:
            return None  # content objects, or types JSON Schema cannot say
        if schema.get("type") == "object":
            return cls(schema, adapter)
        return cls({"type": "object", "properties": {"result": schema}, "required": ["result"]}, adapter, True)

    @classmethod
    def declared(cls, schema: dict) -> "Output":
        return cls(schema)

    def structured(self, value, result: dict) -> dict:
        """The call's result with its `structuredContent` checked against the schema."""
        if self.wrapped:
            data = self.adapter.dump_python(self.adapter.validate_python(value), mode="json")
            return {"content": [content.content_item(json.dumps(data))], "structuredContent": {"result": data}}
        data = result.get("structuredContent")
        if data is None:
            raise OutputMismatch("the tool returned no structured content")
        if self.adapter is not None:
            self.adapter.validate_python(data)
        else:
            _validate_schema(data, self.schema)
        return result


def _validate_schema(data, schema: dict):
    import jsonschema

    try:
        jsonschema.validate(data, schema)
    except jsonschema.ValidationError as exc:
        raise OutputMismatch(exc.message) from None


ICON_THEMES = ("light", "dark")


def checked_icons(icons) -> list | None:
    """Icons as the spec has them (`src` an https: or data: URI, optional `mimeType`, `sizes`,
    `theme`): clients must refuse others, so a wrong one fails at declaration, not in a client."""
    if icons is None:
        return None
    if not isinstance(icons, (list, tuple)):
        raise ValueError("icons must be a list of {'src': ..., 'mimeType': ..., 'sizes': [...], 'theme': ...}")
    for icon in icons:
        src = icon.get("src") if isinstance(icon, dict) else None
        if not isinstance(src, str) or not src.startswith(("https://", "data:")):
            raise ValueError(f"icon src must be an https: or data: URI, not {src!r}")
        if "sizes" in icon and not (isinstance(icon["sizes"], list) and all(isinstance(x, str) for x in icon["sizes"])):
            raise ValueError("icon sizes must be a list of strings such as '48x48' or 'any'")
        if "theme" in icon and icon["theme"] not in ICON_THEMES:
            raise ValueError("icon theme must be 'light' or 'dark'")
    return [dict(icon) for icon in icons]


def Header(name: str, **field):
    """Mirror a tool argument as the `Mcp-Param-{name}` HTTP header (2026-07-28's `x-mcp-header`):
    `region: Annotated[str, Header("Region")]`. Clients send it; the server checks it matches."""
    extra = dict(field.pop("json_schema_extra", None) or {}, **{"x-mcp-header": name})
    return Field(json_schema_extra=extra, **field)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", name) if part) or "Fn"


def _description(fn, given):
    return given if given is not None else (inspect.getdoc(fn) or "")


class Guarded:
    """Who may see and use an item: Django permissions and/or a predicate on the user, and the
    OAuth scopes a caller's token must carry (`scopes`)."""

    permissions: tuple = ()
    allow: Callable | None = None
    scopes: tuple = ()

    def missing_scopes(self, granted) -> tuple:
        """The scopes this item needs that `granted` lacks; `granted` None is a caller whose
        credentials carry no scopes (Django's login), whom scopes do not limit."""
        if not self.scopes or granted is None:
            return ()
        return tuple(scope for scope in self.scopes if scope not in granted)

    @property
    def restricted(self) -> bool:
        return bool(self.permissions) or self.allow is not None

    def allowed(self, user) -> bool:
        """Sync (permission checks may query the database): call it from the database thread."""
        if not self.restricted:
            return True
        if user is None or not getattr(user, "is_authenticated", False):
            return False
        if self.permissions and not user.has_perms(self.permissions):
            return False
        return self.allow is None or bool(self.allow(user))


def _perms(permissions) -> tuple:
    if not permissions:
        return ()
    return (permissions,) if isinstance(permissions, str) else tuple(permissions)


SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def _scopes(scopes) -> tuple:
    """OAuth scope names (RFC 6749 3.3: printable ASCII without space, quote or backslash), so
    they can be quoted into WWW-Authenticate as they are."""
    found = _perms(scopes)
    for scope in found:
        if not isinstance(scope, str) or not SCOPE_TOKEN.fullmatch(scope):
            raise ValueError(f"{scope!r} is not an OAuth scope (RFC 6749 3.3: printable ASCII, no space, \" or \\)")
    return found


@dataclass
class Tool(Guarded):
    name: str
    fn: Callable
    signature: Signature
    description: str = ""
    title: str | None = None
    input_schema: dict | None = None
    output_schema: dict | None = None
    annotations: dict | None = None
    disconnect_policy: Any = None
    retry_ms: Any = None
    meta: dict | None = None
    permissions: tuple = ()
    allow: Callable | None = None
    task_support: str = "forbidden"
    output: "Output | None" = None
    icons: list | None = None
    scopes: tuple = ()

    def definition(self) -> dict:
        item = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema or self.signature.schema(),
        }
        if self.title:
            item["title"] = self.title
        if self.output_schema:
            item["outputSchema"] = self.output_schema
        if self.annotations:
            item["annotations"] = self.annotations
        if self.meta:
            item["_meta"] = self.meta
        if self.icons:
            item["icons"] = self.icons
        return item

    @property
    def header_params(self) -> list[tuple[tuple[str, ...], str]]:
        """The arguments mirrored as `Mcp-Param-{name}` headers (`x-mcp-header` in the input
        schema, reached through `properties` only): (path into the arguments, header name)."""
        found = self.__dict__.get("_header_params")
        if found is None:
            found = []
            stack = [((), self.input_schema or self.signature.schema())]
            while stack:
                path, schema = stack.pop()
                for key, prop in (schema.get("properties") or {}).items():
                    if isinstance(prop, dict):
                        if isinstance(prop.get("x-mcp-header"), str):
                            found.append(((*path, key), prop["x-mcp-header"]))
                        stack.append(((*path, key), prop))
            self.__dict__["_header_params"] = found
        return found


@dataclass
class Resource(Guarded):
    uri: str
    fn: Callable
    signature: Signature
    name: str
    description: str = ""
    title: str | None = None
    mime_type: str | None = None
    completions: dict = field(default_factory=dict)
    pattern: re.Pattern | None = None
    permissions: tuple = ()
    allow: Callable | None = None
    icons: list | None = None
    scopes: tuple = ()

    @property
    def is_template(self):
        return self.pattern is not None

    def definition(self) -> dict:
        key = "uriTemplate" if self.is_template else "uri"
        item = {key: self.uri, "name": self.name}
        for attr, value in (("title", self.title), ("description", self.description), ("mimeType", self.mime_type),
                            ("icons", self.icons)):
            if value:
                item[attr] = value
        return item

    def match(self, uri: str) -> dict | None:
        if not self.is_template:
            return {} if uri == self.uri else None
        m = self.pattern.fullmatch(uri)
        return m.groupdict() if m else None


@dataclass
class Prompt(Guarded):
    name: str
    fn: Callable
    signature: Signature
    description: str = ""
    title: str | None = None
    completions: dict = field(default_factory=dict)
    permissions: tuple = ()
    allow: Callable | None = None
    icons: list | None = None
    scopes: tuple = ()

    def definition(self) -> dict:
        arguments = []
        for name, f in self.signature.model.model_fields.items():
            arg = {"name": name, "required": f.is_required()}
            if f.description:
                arg["description"] = f.description
            arguments.append(arg)
        item = {"name": self.name, "description": self.description, "arguments": arguments}
        if self.title:
            item["title"] = self.title
        if self.icons:
            item["icons"] = self.icons
        return item


def _template_pattern(uri: str) -> re.Pattern | None:
    """RFC 6570 level-1 templates (`{var}`) -> a regex with named groups."""
    if "{" not in uri:
        return None
    parts, pos = [], 0
    for m in re.finditer(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", uri):
        parts.append(re.escape(uri[pos : m.start()]))
        parts.append(f"(?P<{m.group(1)}>[^/]+)")
        pos = m.end()
    parts.append(re.escape(uri[pos:]))
    return re.compile("".join(parts))


class Registry:
    """What one server offers. Decorators accept a bare function or keyword options."""

    def __init__(self):
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.prompts: dict[str, Prompt] = {}

    def tool(self, fn=None, *, name=None, description=None, title=None, input_schema=None,
             output_schema=None, annotations=None, disconnect_policy=None, retry_ms=None, meta=None,
             permissions=None, allow=None, task_support="forbidden", icons=None, scopes=None):
        """Declare a tool. `disconnect_policy` and `retry_ms` override the settings for its streams;
        `permissions` (Django permission names) and `allow(user)` hide it from other users;
        `scopes` (OAuth scope names) hide it from tokens without them all, whose calls get 403
        insufficient_scope; `task_support` ("forbidden", "optional", "required") whether a call
        may run as a task."""
        if task_support not in TASK_SUPPORT:
            raise ValueError(f"task_support must be one of {', '.join(TASK_SUPPORT)}")

        def register(fn):
            tool_name = name or fn.__name__
            sig = Signature.of(fn, tool_name)
            output = Output.declared(output_schema) if output_schema is not None else Output.of(
                typing.get_type_hints(fn, include_extras=True).get("return", inspect.Parameter.empty))
            self.tools[tool_name] = Tool(
                tool_name, fn, sig, _description(fn, description), title, input_schema,
                output.schema if output else None, annotations, disconnect_policy, retry_ms, meta, _perms(permissions),
                allow, task_support, output, checked_icons(icons), _scopes(scopes),
            )
            return fn

        return register(fn) if fn is not None else register

    def resource(self, uri: str, *, name=None, description=None, title=None, mime_type=None, completions=None,
                 permissions=None, allow=None, icons=None, scopes=None):
        """Declare a resource; a URI with `{var}` placeholders declares a template. `permissions`,
        `allow` and `scopes` as for tools."""

        def register(fn):
            self.resources[uri] = Resource(
                uri, fn, Signature.of(fn, name or fn.__name__), name or fn.__name__,
                _description(fn, description), title, mime_type, completions or {}, _template_pattern(uri),
                _perms(permissions), allow, checked_icons(icons), _scopes(scopes),
            )
            return fn

        return register

    def prompt(self, fn=None, *, name=None, description=None, title=None, completions=None, permissions=None,
               allow=None, icons=None, scopes=None):
        """Declare a prompt; `permissions`, `allow` and `scopes` as for tools."""

        def register(fn):
            prompt_name = name or fn.__name__
            self.prompts[prompt_name] = Prompt(
                prompt_name, fn, Signature.of(fn, prompt_name), _description(fn, description), title,
                completions or {}, _perms(permissions), allow, checked_icons(icons), _scopes(scopes),
            )
            return fn

        return register(fn) if fn is not None else register

    def find_resource(self, uri: str) -> tuple[Resource, dict] | tuple[None, None]:
        exact = self.resources.get(uri)
        if exact is not None and not exact.is_template:
            return exact, {}
        for resource in self.resources.values():
            if resource.is_template:
                args = resource.match(uri)
                if args is not None:
                    return resource, args
        return None, None


async def call_tool(tool: Tool, arguments: dict | None, ctx: Context) -> dict:
    """Run a tool. Bad arguments and ToolError become `isError` results the model can read."""
    try:
        kwargs = tool.signature.bind(arguments)
    except ArgumentsError as exc:
        return {"content": [{"type": "text", "text": exc.message}], "isError": True}
    try:
        value = await tool.signature.call(tool.fn, kwargs, ctx)
    except content.ToolError as exc:
        return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
    except Exception as exc:
        if isinstance(exc, JSONRPCError):
            raise
        logger.exception("Tool %s failed", tool.name)
        text = f"Error executing tool {tool.name}"
        if settings.DEBUG:
            text += f": {type(exc).__name__}: {exc}"
        return {"content": [{"type": "text", "text": text}], "isError": True}
    result = content.tool_result(value)
    if tool.output is None or result.get("isError"):
        return result
    try:
        return tool.output.structured(value, result)
    except (OutputMismatch, ValidationError) as exc:
        logger.error("Tool %s returned a result that does not match its output schema: %s", tool.name, exc)
        return {"content": [{"type": "text", "text": f"Tool {tool.name} returned a result that does not match "
                                                     "its output schema"}], "isError": True}

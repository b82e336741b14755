"""What a tool, resource or prompt function sees of its request: declare a `ctx: Context` parameter."""
from __future__ import annotations

import asyncio
import inspect
from typing import Any, Protocol

from asgiref.sync import async_to_sync

from . import elicitation, jsonrpc, sampling
from .content import ToolError

INPUT_CAPABILITIES = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling",
                      "roots/list": "roots"}
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
ELICIT_ACTIONS = ("accept", "decline", "cancel")
# How often a tool waiting for a URL elicitation's page reads whether it is done.
ELICITATION_POLL_SECONDS = 1.0


def declared(capabilities, capability: str) -> bool:
    """Whether the client declared `capability`, a name or a dotted path ("sampling.tools"). An
    elicitation capability that names no mode is form mode only: "elicitation.form" holds for it."""
    if capability == "elicitation.form":
        if not isinstance(capabilities, dict) or "elicitation" not in capabilities:
            return False
        modes = capabilities["elicitation"]
        return not isinstance(modes, dict) or "form" in modes or "url" not in modes
    node = capabilities
    for part in capability.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def needed_capability(request: dict) -> str:
    """What a question (`{"method", "params"}`) needs the client to have declared."""
    method, params = request["method"], request.get("params") or {}
    if method == "elicitation/create":
        return "elicitation.url" if params.get("mode") == "url" else "elicitation.form"
    if method == "sampling/createMessage" and ("tools" in params or "toolChoice" in params):
        return "sampling.tools"
    return INPUT_CAPABILITIES[method]


def _nested(capability: str) -> dict:
    """"sampling.tools" -> {"sampling": {"tools": {}}}"""
    tree: dict = {}
    for part in reversed(capability.split(".")):
        tree = {part: tree}
    return tree


def check_answer(where: str, method: str, response) -> dict:
    """A client's answer to one of the server's questions has the shape of the result the question
    asks for, down to what a tool reads in it: an elicitation's action and content (an object), a
    sampling result's content blocks (objects with a type), roots (objects with a URI). -32602
    naming `where` if not: a tool never gets an answer it cannot read. (Other methods' answers, as
    they come.)"""
    if method not in INPUT_CAPABILITIES:
        return response
    if not isinstance(response, dict):
        raise jsonrpc.InvalidParams(f"Invalid params: {where} must be an object")
    if method == "elicitation/create":
        if response.get("action") not in ELICIT_ACTIONS:
            raise jsonrpc.InvalidParams(f"Invalid params: {where}.action must be one of {', '.join(ELICIT_ACTIONS)}")
        if response.get("content") is not None and not isinstance(response["content"], dict):
            raise jsonrpc.InvalidParams(f"Invalid params: {where}.content must be an object")
    elif method == "sampling/createMessage":
        sampling.check_result(where, response)
    elif method == "roots/list":
        roots = response.get("roots")
        if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("uri"), str)
                                                  for r in roots):
            raise jsonrpc.InvalidParams(f"Invalid params: {where}.roots must be a list of roots with a uri")
    return response


class Host(Protocol):
    """What the layer running a request provides to it: where its messages go (durable streams,
    or nowhere), the session state a method may change, and the thread where blocking code runs."""

    async def send(self, message: dict) -> None: ...

    async def request(self, method: str, params: dict | None, timeout: float | None) -> dict: ...

    async def close_connection(self, retry_ms: int | None) -> None: ...

    async def notify_session(self, message: dict) -> None: ...

    async def run_sync(self, fn, *args): ...

    async def subscribe(self, uri: str) -> None: ...

    async def unsubscribe(self, uri: str) -> None: ...

    async def set_log_level(self, level: str) -> None: ...


class ClientCapabilityError(ToolError):
    """A session's tool asked for something its client did not declare: the tool may catch it and
    do without; if it does not, the call ends with an `isError` result saying so (the client's
    request itself was valid)."""

    def __init__(self, capability: str):
        super().__init__(f"The client did not declare the '{capability}' capability this tool needs")
        self.capability = capability


class MissingCapability(jsonrpc.JSONRPCError):
    """A modern request needs a capability its client did not declare (-32021)."""

    def __init__(self, capability: str):
        super().__init__(jsonrpc.MISSING_CLIENT_CAPABILITY,
                         f"The client did not declare the '{capability}' capability this request needs",
                         {"requiredCapabilities": _nested(capability)})


# Where the endpoint puts the OAuth scopes its caller's credentials carry, in the ASGI scope: a
# frozenset, or None for a caller whose credentials have no scopes (Django's login).
GRANTED_SCOPES = "mcp_transport.granted_scopes"


class Context:
    """Progress, logging, requests to the client and connection control for one request."""

    def __init__(self, *, server, session, request_id, params: dict | None, host: Host, user=None, scope=None,
                 modern=None, inputs=None, task=None):
        self.server = server
        self.session = session
        self.request_id = request_id
        self.params = params or {}
        self.host = host
        self.user = user
        self.scope = scope
        # A 2026-07-28 request: its RequestMeta, and the answers it brings to the tool's questions.
        self.modern = modern
        self.inputs = inputs
        # A call that may run as a task: its handle (protocol.tasks.TaskControl), else None.
        self.task = task
        self._asked = 0

    @property
    def granted_scopes(self) -> frozenset | None:
        """The caller's OAuth scopes; None when scopes do not limit it (Django's login, or work
        resumed outside any request: a task admitted by the request that created it)."""
        return (self.scope or {}).get(GRANTED_SCOPES)

    @property
    def meta(self) -> dict:
        meta = self.params.get("_meta")
        return meta if isinstance(meta, dict) else {}

    @property
    def progress_token(self):
        return self.meta.get("progressToken")

    @property
    def client_capabilities(self) -> dict:
        if self.modern is not None:
            return self.modern.capabilities
        return getattr(self.session, "client_capabilities", None) or {}

    @property
    def log_threshold(self) -> str | None:
        """The lowest level sent: the session's `logging/setLevel` (debug when unset), or the modern
        request's own logLevel (nothing at all when unset)."""
        if self.modern is not None:
            return self.modern.log_level
        return getattr(self.session, "log_level", "") or "debug"

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None):
        """Send `notifications/progress` if the client asked for progress (a no-op otherwise)."""
        token = self.progress_token
        if token is None:
            return
        params = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.send_notification("notifications/progress", params)

    async def log(self, level: str, data: Any, logger: str | None = None):
        """Send `notifications/message` unless the client's log level filters it out."""
        if level not in LOG_LEVELS:
            raise ValueError(f"Unknown log level {level!r}")
        threshold = self.log_threshold
        if threshold is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return
        params = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self.send_notification("notifications/message", params)

    async def debug(self, data, logger=None):
        await self.log("debug", data, logger)

    async def info(self, data, logger=None):
        await self.log("info", data, logger)

    async def warning(self, data, logger=None):
        await self.log("warning", data, logger)

    async def error(self, data, logger=None):
        await self.log("error", data, logger)

    async def send_notification(self, method: str, params: dict | None = None):
        await self.host.send(jsonrpc.notification(method, params))

    async def send_request(self, method: str, params: dict | None = None, timeout: float | None = None,
                           key: str | None = None) -> dict:
        """Ask the client something and wait for its answer: on a session, a request on this request's
        stream; on a modern request, the answer its retry brought, or the end of this round (`mrtr`)."""
        if self._task_id() is not None or self.inputs is not None:
            key = key or self._next_key(method)
            return (await self.ask({key: {"method": method, "params": params or {}}}, timeout))[key]
        return check_answer(f"the client's {method} result", method, await self.host.request(method, params, timeout))

    def _task_id(self):
        return self.task.task_id if self.task is not None else None

    def _next_key(self, method: str) -> str:
        """Questions are numbered in asking order (a task's keys are never reused)."""
        if self.inputs is not None:
            return self.inputs.next_key(method)
        self._asked += 1
        return f"{INPUT_CAPABILITIES[method]}-{self._asked}"

    async def ask(self, requests: dict[str, dict], timeout: float | None = None) -> dict[str, dict]:
        """Several questions at once, key -> `ctx.elicitation(...)`, `ctx.sampling(...)` or
        `ctx.roots_request()`; returns key -> the client's answer. On a modern request they go out
        together in one input_required result; on a session, as concurrent requests."""
        for request in requests.values():
            self.require_capability(needed_capability(request))
        for request in requests.values():
            if request["method"] == "elicitation/create" and request["params"].get("mode") == "url":
                await self._record(request["params"], None)
        if self._task_id() is not None:
            return await self.task.ask(requests)
        if self.inputs is not None:
            return self.inputs.answers(requests)
        answers = await asyncio.gather(*(self.host.request(r["method"], r["params"] or None, timeout)
                                         for r in requests.values()))
        return {key: check_answer(f"the client's {r['method']} result", r["method"], answer)
                for (key, r), answer in zip(requests.items(), answers)}

    async def continue_as_task(self, status_message: str | None = None) -> bool:
        """From here on, run as a task: the client gets the task's handle now and polls for the
        result; later questions wait in the task. True when the call is a task (a tool that
        supports tasks, a client that accepts them); False: it goes on as a plain call.
        Questions asked before this (2026-07-28) went out as input_required results."""
        if self.task is None:
            return False
        return await self.task.become_task(status_message)

    @property
    def task_id(self) -> str | None:
        """The id of the task this call runs as, once it is one."""
        return self._task_id()

    def require_capability(self, capability: str):
        """Fail the request unless the client declared `capability`, a name or a dotted path
        ("sampling.tools", "elicitation.url"): -32021 on a modern request."""
        if not declared(self.client_capabilities, capability):
            if self.modern is not None:
                # A client without the capability at all is told its name (as the spec's examples).
                top = capability.split(".")[0]
                raise MissingCapability(capability if top in self.client_capabilities else top)
            raise ClientCapabilityError(capability)

    def elicitation(self, message: str, requested_schema: dict | type) -> dict:
        """An `elicitation/create` question, for `ask`."""
        if isinstance(requested_schema, type):
            requested_schema = requested_schema.model_json_schema()
        params = {"message": message, "requestedSchema": requested_schema}
        if self.modern is not None or self.session is not None and self.session.protocol_version >= "2025-11-25":
            params["mode"] = "form"
        return {"method": "elicitation/create", "params": params}

    def url_elicitation(self, message: str, url: str, elicitation_id: str | None = None) -> dict:
        """A URL-mode `elicitation/create` question, for `ask`. On a session it carries an
        `elicitationId` (a new one unless given), which `ask` records; 2026-07-28 has none, so only
        `elicit_url()` and `require_url_elicitation()` record the tool's own id there."""
        if self.modern is None:
            sent_id = elicitation_id if elicitation_id is not None else elicitation.new_id()
        else:
            sent_id = None
        return {"method": "elicitation/create", "params": elicitation.url_params(message, url, sent_id)}

    def sampling(self, messages: list | str, *, max_tokens: int = 1000, system_prompt: str | None = None,
                 tools: list | None = None, tool_choice=None, **params) -> dict:
        """A `sampling/createMessage` question, for `ask`; a plain string is one user text message.
        `tools` (Tool dicts or registered tools) and `tool_choice` ("auto", "required", "none")
        need the client's `sampling.tools`; the conversation is checked as the spec requires
        (ValueError if not)."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        sampling.check_messages(messages)
        params = {"messages": messages, "maxTokens": max_tokens, **params}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if tools is not None:
            params["tools"] = sampling.tool_definitions(tools)
        if tool_choice is not None:
            params["toolChoice"] = sampling.tool_choice(tool_choice)
        return {"method": "sampling/createMessage", "params": params}

    def roots_request(self) -> dict:
        """A `roots/list` question, for `ask`."""
        return {"method": "roots/list", "params": {}}

    async def elicit(self, message: str, requested_schema: dict | type, timeout: float | None = None,
                     key: str | None = None) -> dict:
        """`elicitation/create` (form mode); returns `{"action": ..., "content": ...}`."""
        self.require_capability("elicitation")
        self.require_capability("elicitation.form")
        request = self.elicitation(message, requested_schema)
        return await self.send_request(request["method"], request["params"], timeout, key)

    async def elicit_url(self, message: str, url: str, *, elicitation_id: str | None = None,
                         timeout: float | None = None, key: str | None = None) -> dict:
        """Ask the user to open `url` (URL mode: what they enter there never passes through the
        client). Returns `{"action": ..., "elicitationId": ...}`: "accept" is the user's consent to
        go there, not that they are done; `complete_elicitation(id)` says that, and
        `elicitation_completed(id)` reads it. Needs the client's `elicitation.url`."""
        request = self.url_elicitation(message, url, elicitation_id)
        self.require_capability("elicitation.url")
        if "elicitationId" not in request["params"]:
            await self._record(request["params"], elicitation_id)  # a 2026-07-28 request: the tool's own id
        key = key or self._next_key(request["method"])
        answer = (await self.ask({key: request}, timeout))[key]
        return {**answer, "elicitationId": request["params"].get("elicitationId", elicitation_id)}

    async def require_url_elicitation(self, message: str, url: str, *, elicitation_id: str | None = None,
                                      key: str | None = None):
        """End this request: it cannot go on until the user has been to `url`. On a session, the
        URLElicitationRequiredError (-32042) the client may retry the call after; on 2026-07-28,
        an input_required result with the URL elicitation (the retry runs the tool again, which
        looks whether the interaction is done); in a 2026-07-28 task, an `isError` result naming
        the URL. Needs the client's `elicitation.url`."""
        request = self.url_elicitation(message, url, elicitation_id)
        self.require_capability("elicitation.url")
        await self._record(request["params"], elicitation_id)
        if self.modern is None:
            raise elicitation.URLElicitationRequired([request["params"]])
        if self.inputs is not None and self._task_id() is None:
            self.inputs.require({key or self._next_key("elicitation/create"): request})
        # A 2026-07-28 task has neither -32042 nor rounds: its result says where to go.
        raise ToolError(f"{message} Open {url}, then call again.")

    async def elicitation_completed(self, elicitation_id: str) -> bool:
        """Whether the project said this client's URL elicitation is done (`complete_elicitation`)."""
        return await self.server.elicitation_completed(elicitation_id, self.principal)

    async def wait_for_elicitation(self, elicitation_id: str, timeout: float) -> bool:
        """Wait until the page says this client's URL elicitation is done (True), at most `timeout`
        seconds (False), reading it every ELICITATION_POLL_SECONDS."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not await self.elicitation_completed(elicitation_id):
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(ELICITATION_POLL_SECONDS, left))
        return True

    @property
    def principal(self) -> str:
        """Who is asking, as the transport identifies clients ("user:42", "token:abcd1234"; "" for
        anonymous ones): what a URL elicitation is bound to."""
        if self.session is not None:
            return getattr(self.session, "principal", "") or ""
        return self.inputs.bound[0] if self.inputs is not None else ""

    async def _record(self, params: dict, elicitation_id: str | None) -> str | None:
        """Remember whose elicitation this is, by the id it was sent with (or the tool's own)."""
        elicitation_id = params.get("elicitationId", elicitation_id)
        if elicitation_id is not None:
            session_id = self.session.id if self.session is not None else None
            await self.server.record_elicitation(elicitation.checked_id(elicitation_id), session_id,
                                                 self.principal, params["url"])
        return elicitation_id

    async def sample(self, messages: list | str, *, max_tokens: int = 1000, system_prompt: str | None = None,
                     tools: list | None = None, tool_choice=None, timeout: float | None = None,
                     key: str | None = None, **params) -> sampling.SamplingResult:
        """`sampling/createMessage`; a plain string is sent as one user text message. With `tools`
        the model may answer with tool uses (`result.tool_uses`, `result.stop_reason == "toolUse"`):
        send their results in the next call (`messages + [result.message(), tool_results({...})]`)."""
        self.require_capability("sampling")
        request = self.sampling(messages, max_tokens=max_tokens, system_prompt=system_prompt, tools=tools,
                                tool_choice=tool_choice, **params)
        self.require_capability(needed_capability(request))
        return sampling.SamplingResult(await self.send_request(request["method"], request["params"], timeout, key))

    async def list_roots(self, timeout: float | None = None, key: str | None = None) -> list[dict]:
        self.require_capability("roots")
        result = await self.send_request("roots/list", None, timeout, key)
        return result.get("roots", [])

    async def close_sse_stream(self, retry_ms: int | None = None):
        """End this request's SSE *connection* (not the stream): the client resumes after `retry`."""
        await self.host.close_connection(retry_ms)

    async def notify_resource_updated(self, uri: str):
        await self.host.notify_session(jsonrpc.notification("notifications/resources/updated", {"uri": uri}))

    async def notify_list_changed(self, what: str):
        """`what` is "tools", "resources" or "prompts"; sent on the session's GET stream."""
        await self.host.notify_session(jsonrpc.notification(f"notifications/{what}/list_changed"))


class SyncContext:
    """The same context for sync functions (they run in a thread): every method blocks."""

    def __init__(self, ctx: Context):
        self._ctx = ctx

    def __getattr__(self, name):
        value = getattr(self._ctx, name)
        if inspect.iscoroutinefunction(value):
            return async_to_sync(value)
        return value

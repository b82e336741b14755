"""MCPServer: a named registry plus its dispatcher, mountable at a path like an AdminSite."""
from __future__ import annotations

from typing import Protocol

from django.core.exceptions import ImproperlyConfigured

from ..conf import mcp_settings
from .dispatch import Dispatcher
from .modern import ModernDispatcher
from .registry import Registry, checked_icons

servers: dict[str, "MCPServer"] = {}


class Notifier(Protocol):
    """Delivers server-initiated notifications to sessions; the execution layer registers one
    (`set_notifier`, from the app's `ready()`)."""

    async def notify_subscribers(self, server_name: str, uri: str) -> None: ...

    async def broadcast(self, server_name: str, method: str) -> None: ...

    async def record_elicitation(self, server_name: str, elicitation_id: str, session_id: str | None,
                                 principal: str, url: str) -> bool: ...

    async def elicitation_completed(self, server_name: str, elicitation_id: str, principal: str) -> bool: ...


_notifier: list[Notifier] = []


def set_notifier(notifier: Notifier):
    _notifier[:] = [notifier]


def _notifier_or_fail() -> Notifier:
    if not _notifier:
        raise ImproperlyConfigured("mcp_transport is not in INSTALLED_APPS: no notifier is registered")
    return _notifier[0]


class MCPServer(Registry):
    def __init__(self, name: str = "default", *, version: str = "0.1.0", title: str | None = None,
                 instructions: str | None = None, description: str | None = None, website_url: str | None = None,
                 icons: list | None = None):
        super().__init__()
        if name in servers:
            raise ImproperlyConfigured(f"An MCP server named {name!r} already exists")
        self.name = name
        self.version = version
        self.title = title
        self._instructions = instructions
        self.description = description
        self.website_url = website_url
        self.icons = checked_icons(icons)
        self.dispatcher = Dispatcher(self)
        self.modern = ModernDispatcher(self, self.dispatcher)
        servers[name] = self

    def __repr__(self):
        return f"<MCPServer {self.name!r}>"

    @property
    def instructions(self):
        return self._instructions if self._instructions is not None else mcp_settings.INSTRUCTIONS

    def info(self) -> dict:
        """`serverInfo` (an Implementation): what clients show of this server."""
        info = {"name": self.name, "version": self.version}
        for key, value in (("title", self.title), ("description", self.description),
                           ("websiteUrl", self.website_url), ("icons", self.icons)):
            if value:
                info[key] = value
        return info

    async def notify_resource_updated(self, uri: str):
        """Tell every session subscribed to `uri` (on its GET stream) that it changed."""
        await _notifier_or_fail().notify_subscribers(self.name, uri)

    async def notify_list_changed(self, what: str):
        """`what`: tools, resources or prompts. Goes to every active session of this server."""
        await _notifier_or_fail().broadcast(self.name, f"notifications/{what}/list_changed")


    async def record_elicitation(self, elicitation_id: str, session_id: str | None, principal: str, url: str):
        """Remember who started a URL elicitation (ValueError if its id is already someone else's)."""
        if not await _notifier_or_fail().record_elicitation(self.name, elicitation_id, session_id, principal, url):
            raise ValueError(f"The elicitation id {elicitation_id!r} is already used by another client")

    async def elicitation_completed(self, elicitation_id: str, principal: str) -> bool:
        return await _notifier_or_fail().elicitation_completed(self.name, elicitation_id, principal)


def get_server(name_or_server) -> MCPServer:
    if isinstance(name_or_server, MCPServer):
        return name_or_server
    try:
        return servers[name_or_server]
    except KeyError:
        raise ImproperlyConfigured(f"No MCP server named {name_or_server!r}") from None

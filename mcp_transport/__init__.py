"""django-mcp-transport: serve MCP over Streamable HTTP from Django (2026-07-28 and 2025-11-25 on one endpoint).

    from mcp_transport import mcp, Context

    @mcp.tool
    async def echo(message: str) -> str:
        return message
"""
from .protocol.content import (
    Audio, EmbeddedResource, Image, PromptMessage, ResourceLink, ResourceNotFound, Text, ToolError, ToolResult,
)
from .protocol.context import ClientCapabilityError, Context, SyncContext
from .protocol.elicitation import URLElicitationRequired
from .protocol.jsonrpc import JSONRPCError
from .protocol.registry import Header
from .protocol.sampling import SamplingResult, ToolUse, tool_result, tool_results
from .protocol.server import MCPServer, get_server

__version__ = "0.1.0"

mcp = MCPServer("default")
"""The default server, served at /mcp by `mcp_transport.routing.mcp_application`."""

__all__ = [
    "mcp", "MCPServer", "get_server", "Context", "SyncContext", "JSONRPCError", "ToolError", "ToolResult",
    "Text", "Image", "Audio", "EmbeddedResource", "ResourceLink", "PromptMessage", "Header",
    "ClientCapabilityError", "ResourceNotFound", "URLElicitationRequired", "SamplingResult", "ToolUse",
    "tool_result", "tool_results",
]

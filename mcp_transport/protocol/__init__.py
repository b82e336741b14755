"""MCP itself: JSON-RPC, the registry of tools/resources/prompts, dispatch. No HTTP here."""

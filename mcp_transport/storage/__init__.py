"""Storage: the only writer of sessions, streams and events, and its database thread. Knows no MCP."""

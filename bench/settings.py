"""Settings of the example project as the bench serves it: DEBUG off, MCP_TRANSPORT overridable.

MCP_BENCH_DB=postgres switches to example_project.settings_scaled (PostgreSQL + Redis, configured
by MCP_PG_* and MCP_REDIS_*); otherwise SQLite in the file MCP_EXAMPLE_DB. MCP_BENCH_TRANSPORT
(JSON) is merged over the example's MCP_TRANSPORT (e.g. {"JSON_RESPONSE": true}).
"""
import json
import os

if os.environ.get("MCP_BENCH_DB") == "postgres":
    from example_project.settings_scaled import *  # noqa: F401,F403
else:
    from example_project.settings import *  # noqa: F401,F403
from example_project.settings import MCP_TRANSPORT as _BASE

DEBUG = False
MCP_TRANSPORT = {
    **_BASE,
    # The bench stops its servers with SIGTERM; nothing is left running by then.
    "SHUTDOWN_GRACE_SECONDS": 2.0,
    **json.loads(os.environ.get("MCP_BENCH_TRANSPORT", "{}")),
}
# The bench serves the MCP endpoint alone; nobody opens the admin whose unstyled pages W016 warns of.
SILENCED_SYSTEM_CHECKS = [*globals().get("SILENCED_SYSTEM_CHECKS", []), "mcp_transport.W016"]

"""Settings for the daphne processes the tests start: the example project's, with overrides.

MCP_TEST_TRANSPORT (JSON) is merged over MCP_TRANSPORT; MCP_EXAMPLE_DB picks the SQLite file.
"""
import json
import os

from example_project.settings import *  # noqa: F401,F403
from example_project.settings import MCP_TRANSPORT as _BASE

MCP_TRANSPORT = {**_BASE, **json.loads(os.environ.get("MCP_TEST_TRANSPORT", "{}"))}

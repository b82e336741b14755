"""pytest fixtures for testing your MCP server in-process (pytest-django): in `conftest.py`,

    pytest_plugins = ["mcp_transport.pytest_plugin"]

    async def test_count(mcp_client):
        await mcp_client.initialize()
        response = await mcp_client.call_tool("count_books", {"author": "Le Guin"})
        assert response.result["content"][0]["text"] == "6"

`mcp_client` speaks 2025-11-25 (sessions: `initialize()` first), `modern_mcp_client` 2026-07-28
(no initialize). Both drive `mcp_application`, your ASGI_APPLICATION unless you override that fixture,
with `transactional_db`: the transport writes from a database thread of its own, which must see the
test's rows.
"""
import pytest
from django.conf import settings
from django.utils.module_loading import import_string

from . import scrape
from .storage.executor import executor
from .testing import MCPCommunicator, ModernCommunicator


@pytest.fixture
def mcp_application():
    """The ASGI application the clients drive: ASGI_APPLICATION. Override it to test another."""
    return import_string(settings.ASGI_APPLICATION)


@pytest.fixture(scope="session")
def mcp_database_thread(django_db_setup, django_db_blocker):
    """Closes the transport's database connections before the test database is dropped (PostgreSQL
    refuses to drop a database still in use)."""
    yield
    executor.close()
    scrape.close()
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def mcp_client(transactional_db, mcp_database_thread, mcp_application):
    """An in-process MCP client (2025-11-25), not yet initialized: `await mcp_client.initialize()`."""
    yield MCPCommunicator(mcp_application)
    executor.settle()


@pytest.fixture
def modern_mcp_client(transactional_db, mcp_database_thread, mcp_application):
    """An in-process MCP client speaking 2026-07-28 (stateless: no initialize)."""
    yield ModernCommunicator(mcp_application)
    executor.settle()

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
from .execution.worker import worker
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
    worker.executor.close()
    scrape.close()
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def mcp_database_settled(transactional_db, mcp_database_thread):
    """The database thread's last batch has ended before the test's tables are flushed.

    Torn down after the test's event loop is closed (nothing queues more) and before
    `transactional_db` flushes: the batch the thread took last (a request's write, the worker's
    heartbeat) may still be running, and its locks against the flush's TRUNCATE of every table
    deadlock on PostgreSQL. What the process remembers of the rows (sessions, finished tasks) goes
    with them. Tests that build their own communicators under `django_db(transaction=True)` use
    it: `pytest.mark.usefixtures("mcp_database_settled")`.
    """
    yield
    worker.executor.settle()
    worker.recent.clear()


@pytest.fixture
def mcp_client(mcp_database_settled, mcp_application):
    """An in-process MCP client (2025-11-25), not yet initialized: `await mcp_client.initialize()`."""
    return MCPCommunicator(mcp_application)


@pytest.fixture
def modern_mcp_client(mcp_database_settled, mcp_application):
    """An in-process MCP client speaking 2026-07-28 (stateless: no initialize)."""
    return ModernCommunicator(mcp_application)

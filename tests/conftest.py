import pytest

from mcp_transport import scrape
from mcp_transport.storage.executor import executor

from .live import DaphneServer, MCPClient


@pytest.fixture(scope="session")
def example_server():
    """One daphne serving the example project with its default settings, for the whole run."""
    with DaphneServer() as server:
        yield server


@pytest.fixture
def daphne():
    """Start daphne with MCP_TRANSPORT overrides: `daphne({"DISCONNECT_POLICY": "after_priming"})`."""
    servers = []

    def start(transport=None, **kwargs):
        server = DaphneServer(transport, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def client(example_server):
    c = MCPClient(example_server.url)
    yield c
    c.close()


@pytest.fixture(scope="session", autouse=True)
def _close_database_thread(django_db_setup, django_db_blocker):
    """The store's database thread keeps a connection; close it before the test database goes."""
    yield
    executor.close()
    scrape.close()
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()

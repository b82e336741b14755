import pytest

from .live import DaphneServer, MCPClient

pytest_plugins = ["mcp_transport.pytest_plugin"]


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
def _close_database_thread(mcp_database_thread):
    """The store's database thread keeps a connection; the plugin's fixture closes it before the test
    database goes."""

import pytest

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

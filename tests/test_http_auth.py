"""Authentication over real HTTP: daphne, a token made by `manage.py mcp_token`, 401s, ownership."""
import os
import subprocess
import sys

import httpx

from .live import ROOT, MCPClient

SECURED = {"AUTH_BACKENDS": ["mcp_transport.auth.BearerTokenBackend"], "REQUIRE_AUTH": True,
           "AUTHORIZATION_SERVERS": ["https://login.example"]}


def manage(server, *args) -> str:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.live_settings", "MCP_EXAMPLE_DB": server.db}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def authed(url, token) -> MCPClient:
    client = MCPClient(url)
    client.http.headers["Authorization"] = f"Bearer {token}"
    return client


def test_bearer_tokens_over_http(daphne):
    server = daphne(SECURED)
    manage(server, "shell", "-c", "from django.contrib.auth.models import User; "
                                  "User.objects.create_user('ann'); User.objects.create_user('ben')")
    ann, ben = (manage(server, "mcp_token", "create", name) for name in ("ann", "ben"))

    anonymous = httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                           headers={"Accept": "application/json, text/event-stream"})
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == -32600
    metadata_url = f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"
    assert anonymous.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
    metadata = httpx.get(metadata_url).json()
    assert metadata["resource"] == server.url and metadata["authorization_servers"] == ["https://login.example"]

    client = authed(server.url, ann)
    client.initialize()
    request_id, result = client.call_tool("echo", {"message": "mine"})
    assert result.messages[-1]["result"]["content"][0]["text"] == "mine"

    intruder = authed(server.url, ben)
    intruder.session_id, intruder.version = client.session_id, client.version
    assert intruder.post({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).status_code == 404
    assert intruder.resume(result.events[0].id).status == 404

    prefix = manage(server, "mcp_token", "list", "--user", "ann").split()[0]
    manage(server, "mcp_token", "revoke", prefix)
    revoked = client.post({"jsonrpc": "2.0", "id": 6, "method": "ping"})
    assert revoked.status_code == 401 and 'error="invalid_token"' in revoked.headers["www-authenticate"]

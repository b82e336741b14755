"""The Django REST framework adapter (mcp_transport.drf) over real HTTP: a daphne whose
AUTH_BACKENDS is DRF's TokenAuthentication and SessionAuthentication, with `rest_framework.authtoken`
tokens and a logged-in session made by the project's own tables; a bad token is a 401 like any other.
"""
import os
import subprocess
import sys

import httpx
import pytest

from .live import ACCEPT_BOTH, ROOT, MCPClient

DRF = {"AUTH_BACKENDS": ["mcp_transport.drf.DRFAuthentication"], "REQUIRE_AUTH": True}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def manage(server, *args) -> str:
    """manage.py on the server's database, with DRF installed as the server has it."""
    env = {**os.environ, **server.db_env(), "MCP_TEST_DRF": "1"}
    output = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                            capture_output=True, text=True).stdout.strip()
    return output.splitlines()[-1] if output else ""  # what the command printed last


@pytest.mark.timeout(300)  # a daphne and two manage.py runs of its own
def test_drf_token_and_session_authentication_over_http(daphne):
    server = daphne(DRF, env={"MCP_TEST_DRF": "1"})
    ann, ben, ann_id = manage(server, "shell", "-c", (
        "from django.core.management import call_command; call_command('migrate', verbosity=0); "
        "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token; "
        "ann = User.objects.create_user('ann', password='pw-ann', is_staff=True); ben = User.objects.create_user('ben'); "
        "print(Token.objects.create(user=ann).key, Token.objects.create(user=ben).key, ann.pk)")).split()

    anonymous = httpx.post(server.url, json=PING, headers={"Accept": ACCEPT_BOTH})
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == -32600
    assert anonymous.headers["www-authenticate"] == "Bearer"

    bad = httpx.post(server.url, json=PING, headers={"Accept": ACCEPT_BOTH, "Authorization": "Token nope"})
    assert bad.status_code == 401 and bad.headers["content-type"] == "application/json"
    assert bad.json()["error"]["code"] == -32600 and "Invalid token" in bad.json()["error"]["message"]
    assert bad.headers["www-authenticate"] == 'Bearer error="invalid_token"'

    client = MCPClient(server.url)
    client.http.headers["Authorization"] = f"Token {ann}"
    client.initialize()
    _, result = client.call_tool("echo", {"message": "via drf"})
    assert result.messages[-1]["result"]["content"][0]["text"] == "via drf"
    owner = server.query("SELECT principal FROM mcp_transport_session WHERE id = ?", (client.session_id,))
    assert owner == [(f"user:{ann_id}",)]

    intruder = MCPClient(server.url)
    intruder.http.headers["Authorization"] = f"Token {ben}"
    intruder.session_id, intruder.version = client.session_id, client.version
    assert intruder.post({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).status_code == 404

    manage(server, "shell", "-c", "from rest_framework.authtoken.models import Token; "
                                  f"Token.objects.filter(key='{ann}').delete()")
    revoked = client.post({"jsonrpc": "2.0", "id": 6, "method": "ping"})
    assert revoked.status_code == 401 and 'error="invalid_token"' in revoked.headers["www-authenticate"]

    # SessionAuthentication: Django's login cookie, and DRF's CSRF check for it.
    login = httpx.Client(base_url=f"http://127.0.0.1:{server.port}")
    page = login.get("/admin/login/")
    csrf = login.cookies["csrftoken"]
    login.post("/admin/login/", data={"username": "ann", "password": "pw-ann", "csrfmiddlewaretoken": csrf,
                                      "next": "/admin/"}, headers={"Referer": str(page.url)})
    assert "sessionid" in login.cookies
    cookie = f"sessionid={login.cookies['sessionid']}; csrftoken={csrf}"
    without_csrf = httpx.post(server.url, json=PING, headers={"Accept": ACCEPT_BOTH, "Cookie": cookie})
    assert without_csrf.status_code == 401 and "CSRF" in without_csrf.json()["error"]["message"]
    browser = MCPClient(server.url)
    browser.http.headers.update({"Cookie": cookie, "X-CSRFToken": csrf})
    browser.initialize()
    _, result = browser.call_tool("echo", {"message": "via the session"})
    assert result.messages[-1]["result"]["content"][0]["text"] == "via the session"
    owner = server.query("SELECT principal FROM mcp_transport_session WHERE id = ?", (browser.session_id,))
    assert owner == [(f"user:{ann_id}",)]

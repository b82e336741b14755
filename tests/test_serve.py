"""`python -m mcp_transport.serve` (daphne without Twisted's form parsing), plain daphne and uvicorn.

The rest of the live suite runs under the launcher; these check what it changes and that plain
daphne and uvicorn, which the README also documents, serve the same endpoint and shut down the same
way (uvicorn through the ASGI lifespan).
"""
import asyncio
import gc
import io
import subprocess
import sys

import pytest
from daphne import http_protocol
from twisted.internet.testing import StringTransport

from mcp_transport import serve

from .live import ROOT, DaphneServer, MCPClient


def test_the_launchers_requests_skip_form_parsing():
    server = serve.Server(application=None, endpoints=["tcp:port=0:interface=127.0.0.1"])
    server.connections = {}  # as daphne's run() starts
    server.http_factory = http_protocol.HTTPFactory(server)  # what daphne's run() assigns
    assert isinstance(server.http_factory, serve.HTTPFactory)
    protocol = server.http_factory.buildProtocol(("127.0.0.1", 0))
    assert protocol.requestFactory is serve.WebRequest
    protocol.makeConnection(StringTransport())
    request = protocol.requestFactory(protocol._channel, 0)  # as Twisted's HTTPChannel calls it
    assert isinstance(request, http_protocol.WebRequest)
    assert request._parsePOSTFormSubmission is (not serve.FORM_PARSING_SWITCH)
    server.http_factory._logFile = io.StringIO()  # where Twisted would write its access-log line
    server.http_factory.log(request)
    assert server.http_factory._logFile.getvalue() == ""


def test_the_launcher_forgets_a_request_once_its_connection_and_application_are_done():
    """daphne's sweep walks every request it still holds once a second; the launcher drops a
    finished one at once, and leaves a failed application to the sweep, which reports it."""

    async def ok(scope, receive, send):
        pass

    async def fails(scope, receive, send):
        raise RuntimeError("boom")

    async def scenario():
        server = serve.Server(application=None, endpoints=["tcp:port=0:interface=127.0.0.1"])
        server.connections = {}
        finished_first, app_first, failed = object(), object(), object()
        for protocol, app in ((finished_first, ok), (app_first, ok), (failed, fails)):
            server.application = app
            server.protocol_connected(protocol)
            server.create_application(protocol, {"type": "http"})
        server.protocol_disconnected(finished_first)
        assert finished_first in server.connections  # its application has not run yet
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert finished_first not in server.connections
        assert app_first in server.connections  # done, but its connection is still open
        server.protocol_disconnected(app_first)
        server.protocol_disconnected(app_first)  # finish, then the connection's loss
        server.protocol_disconnected(failed)
        assert list(server.connections) == [failed]

    asyncio.run(scenario())


def test_the_launcher_freezes_the_startup_heap_and_collects_less_often(monkeypatch):
    before = gc.get_threshold()
    try:
        serve.tune_gc(0)
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
        serve.tune_gc(12_345)
        assert gc.get_threshold() == (12_345, *before[1:]) and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)

    started = []
    monkeypatch.setattr(serve.Server, "run", lambda self: started.append(self.gc_threshold))
    serve.CommandLineInterface().run(["--gc-threshold", "500", "example_project.asgi:application"])
    serve.CommandLineInterface().run(["example_project.asgi:application"])
    assert started == [500, serve.GC_THRESHOLD]


def test_the_installed_twisted_has_the_switch():
    """The requirements pull a Twisted (through daphne) with the switch; if not, the launcher is a no-op."""
    assert serve.FORM_PARSING_SWITCH


def test_the_launcher_takes_daphnes_options():
    result = subprocess.run([sys.executable, "-m", "mcp_transport.serve", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "mcp_transport" in result.stdout
    for option in ("--bind", "--port", "--proxy-headers", "--http-timeout"):
        assert option in result.stdout


SERVERS = ["mcp_transport.serve", "daphne", "uvicorn"]


@pytest.mark.parametrize("launcher", SERVERS)
def test_every_server_serves_calls_and_refuse_form_bodies(launcher):
    with DaphneServer(launcher=launcher) as server:
        client = MCPClient(server.url)
        try:
            client.initialize()
            request_id, result = client.call_tool("echo", {"message": "hi"})
            assert result.messages[-1] == {"jsonrpc": "2.0", "id": request_id,
                                           "result": {"content": [{"type": "text", "text": "hi"}]}}
            for content_type, body in [("application/x-www-form-urlencoded", b"a=1&b=2"),
                                       ("multipart/form-data; boundary=x",
                                        b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--\r\n')]:
                response = client.post_raw(body, {"content-type": content_type})
                assert response.status_code == 415, response.text
                assert response.json()["error"]["code"] == -32600
        finally:
            client.close()


@pytest.mark.parametrize("launcher", SERVERS)
def test_sigterm_lets_connections_that_cannot_resume_finish_on_themselves(launcher):
    """A 2025-06-18 session's POST stream has no priming event: closed before its first event its
    client has nothing to resume from. SIGTERM leaves such connections open: a call that ends
    within the grace gets its result on the same connection, one that outlives it gets the
    shutdown error there; a 2025-11-25 connection is closed with `retry` at once, as before, and a
    2026-07-28 `subscriptions/listen` stream ends with its result."""
    import concurrent.futures
    import signal
    import time

    listen = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": True},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    listen_headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}

    with DaphneServer(transport={"SHUTDOWN_GRACE_SECONDS": 2.0, "RETRY_MS": 200}, launcher=launcher) as server:
        old, new = MCPClient(server.url, version="2025-06-18"), MCPClient(server.url)
        old.initialize()
        new.initialize()
        calls = {"short": (old, {"count": 6, "delay": 0.15}), "long": (old, {"count": 400, "delay": 0.05}),
                 "polling": (new, {"count": 400, "delay": 0.05})}
        started = {name: [] for name in [*calls, "listen"]}
        listener = MCPClient(server.url, version="2026-07-28")
        with concurrent.futures.ThreadPoolExecutor(len(started)) as pool:
            futures = {name: pool.submit(client.call_tool, "progress", args, progress_token=name,
                                         stop=lambda e, n=name: started[n].append(e) or False)
                       for name, (client, args) in calls.items()}
            futures["listen"] = pool.submit(lambda: (None, listener.stream(
                "POST", listen, headers=listen_headers, stop=lambda e: started["listen"].append(e) or False)))
            while not all(any(e.data for e in events) for events in started.values()):
                time.sleep(0.02)
            server.proc.send_signal(signal.SIGTERM)
            results = {name: f.result(timeout=30)[1] for name, f in futures.items()}
        assert server.proc.wait(timeout=30) is not None

    short, long, polling = results["short"], results["long"], results["polling"]
    assert short.retry is None and short.messages[-1]["result"]["content"][0]["text"] == "done 6"
    assert long.retry is None
    assert long.messages[-1]["error"]["data"]["reason"] == "worker_shutdown", long.messages[-1]
    assert polling.closed_by_server and polling.retry == 200
    assert not any("result" in m or "error" in m for m in polling.messages)
    listened = results["listen"].messages
    assert listened[0]["method"] == "notifications/subscriptions/acknowledged", listened
    assert listened[-1]["id"] == "listen-1" and listened[-1]["result"]["resultType"] == "complete", listened


@pytest.mark.parametrize("launcher", SERVERS)
def test_a_misspelled_policy_stops_the_server_at_startup(launcher):
    """No system checks run under an ASGI server: mcp_application checks the settings when asgi.py loads, so a
    misspelled policy stops the server with the check's message instead of failing the first call."""
    server = DaphneServer({"DISCONNECT_POLICY": "after_primng"}, launcher=launcher)
    try:
        with pytest.raises(RuntimeError, match=f"{launcher} exited") as exited:
            server.start()
    finally:
        server.stop()
    assert "InvalidSettings" in str(exited.value)
    assert "mcp_transport.E003" in str(exited.value) and "Did you mean 'after_priming'?" in str(exited.value)

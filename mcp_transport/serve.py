"""`python -m mcp_transport.serve`: daphne, with the same arguments, minus costs it need not pay.

* Twisted's HTTP request parses the Content-Type of every POST (with the `email` package) to
  decode HTML form bodies into `request.args`, which daphne never reads: it hands the raw body
  to the application. On an MCP endpoint that parse is a large share of the server's CPU per
  call (BENCHMARKS.md), and a multipart body is decoded in memory before the application can
  refuse it. The launcher builds daphne's requests with that parsing off (Twisted has the
  switch since 25.5; on older Twisted they parse as before).
* Twisted's HTTP factory formats an access-log line for every request and hands it to Twisted's
  log, which daphne discards below `-v 2`; daphne writes its own access log. The launcher skips it.
* daphne keeps every finished request until its once-a-second sweep, which walks all of them;
  the launcher drops a request as soon as its connection and its application are both done.
* Python's cyclic garbage collector ran every 700 allocations, and each full collection walked
  the whole of Django, loaded at startup and never garbage, a visible share of the CPU under load. The
  launcher freezes the startup heap (`gc.freeze()`) once the application is loaded and collects
  the youngest generation every `--gc-threshold` allocations (10,000; 0 keeps Python's defaults).

Everything else is daphne's own code.
"""
from __future__ import annotations

import functools
import gc
import inspect

from daphne import cli, http_protocol, server  # daphne.server installs the asyncio reactor first
from twisted.web import http

FORM_PARSING_SWITCH = "parsePOSTFormSubmission" in inspect.signature(http.Request.__init__).parameters
GC_THRESHOLD = 10_000


def tune_gc(threshold: int):
    """Freeze what is loaded so far and collect young objects every `threshold` allocations."""
    if threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(threshold, middle, old)


class WebRequest(http_protocol.WebRequest):
    def __init__(self, *args, **kwargs):
        if FORM_PARSING_SWITCH:
            kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)


class HTTPFactory(http_protocol.HTTPFactory):
    def log(self, request):
        """Twisted's access-log line, which daphne's logging setup throws away."""

    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        if protocol.requestFactory is http_protocol.WebRequest:
            protocol.requestFactory = WebRequest
        return protocol


class Server(server.Server):
    """daphne's Server builds its HTTP factory inside run(); this one takes ours instead."""

    def __init__(self, *args, gc_threshold: int = GC_THRESHOLD, **kwargs):
        super().__init__(*args, **kwargs)
        self.gc_threshold = gc_threshold

    def run(self):
        tune_gc(self.gc_threshold)
        super().run()

    def create_application(self, protocol, scope):
        queue = super().create_application(protocol, scope)
        details = self.connections.get(protocol)
        if queue is not None and details is not None:
            details["application_instance"].add_done_callback(lambda _: self.forget(protocol))
        return queue

    def protocol_disconnected(self, protocol):
        if protocol in self.connections:  # a request's finish and its connection's loss both call this
            super().protocol_disconnected(protocol)
            self.forget(protocol)

    def forget(self, protocol):
        """Drop a request that is over (its connection gone, its application done cleanly) now.

        daphne's once-a-second sweep would: until then every finished request stays in
        `connections`, and each sweep walks them all (a second's worth of requests under load).
        A request without an application yet, or whose application failed (the sweep reports
        it), is left to the sweep.
        """
        details = self.connections.get(protocol)
        if details is None or "disconnected" not in details:
            return
        instance = details.get("application_instance")
        if instance is not None and instance.done() and (instance.cancelled() or instance.exception() is None):
            del self.connections[protocol]

    @property
    def http_factory(self):
        return self._http_factory

    @http_factory.setter
    def http_factory(self, factory):
        self._http_factory = factory if isinstance(factory, HTTPFactory) else HTTPFactory(self)


class CommandLineInterface(cli.CommandLineInterface):
    description = "daphne for MCP endpoints (mcp_transport): the same options as daphne"
    server_class = Server

    def __init__(self):
        super().__init__()
        self.parser.add_argument(
            "--gc-threshold", type=int, default=GC_THRESHOLD,
            help=f"allocations between young-generation garbage collections, after the startup heap is "
                 f"frozen (default {GC_THRESHOLD}; 0 keeps Python's defaults and freezes nothing)",
        )

    def run(self, args):
        options, _ = self.parser.parse_known_args(args)
        self.server_class = functools.partial(Server, gc_threshold=options.gc_threshold)
        super().run(args)


if __name__ == "__main__":
    CommandLineInterface.entrypoint()

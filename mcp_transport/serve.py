"""`python -m mcp_transport.serve`: daphne, with the same arguments, minus a cost it need not pay.

Twisted's HTTP request parses the Content-Type of every POST (with the `email` package) to
decode HTML form bodies into `request.args`, which daphne never reads: it hands the raw body to
the application. On an MCP endpoint that parse cost 7-27 % of the server's CPU per call in
A/B runs (BENCHMARKS.md), and a multipart body is decoded in memory before the application
can refuse it. This launcher builds daphne's requests with that parsing off (Twisted has the
switch since 25.5; on older Twisted this is plain daphne). Everything else is daphne's own code.
"""
from __future__ import annotations

import inspect

from daphne import cli, http_protocol, server  # daphne.server installs the asyncio reactor first
from twisted.web import http

FORM_PARSING_SWITCH = "parsePOSTFormSubmission" in inspect.signature(http.Request.__init__).parameters


class WebRequest(http_protocol.WebRequest):
    def __init__(self, *args, **kwargs):
        if FORM_PARSING_SWITCH:
            kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)


class HTTPFactory(http_protocol.HTTPFactory):
    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        if protocol.requestFactory is http_protocol.WebRequest:
            protocol.requestFactory = WebRequest
        return protocol


class Server(server.Server):
    """daphne's Server builds its HTTP factory inside run(); this one takes ours instead."""

    @property
    def http_factory(self):
        return self._http_factory

    @http_factory.setter
    def http_factory(self, factory):
        self._http_factory = factory if isinstance(factory, HTTPFactory) else HTTPFactory(self)


class CommandLineInterface(cli.CommandLineInterface):
    description = "daphne for MCP endpoints (mcp_transport): the same options as daphne"
    server_class = Server


if __name__ == "__main__":
    CommandLineInterface.entrypoint()

"""Checks on a request's headers before any MCP is involved: Host, Origin, Accept, Content-Type, version."""
from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from ..conf import mcp_settings
from ..protocol.dispatch import SUPPORTED_VERSIONS
from ..protocol.jsonrpc import INVALID_REQUEST


class Rejected(Exception):
    """A request refused before dispatch: HTTP status, JSON-RPC code and message."""

    def __init__(self, status: int, message: str, code: int = INVALID_REQUEST, headers=()):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = list(headers)


def too_many(exc) -> Rejected:
    """A limit hit (`limits.LimitExceeded`) as the request's answer: 429, with Retry-After when known."""
    headers = [("retry-after", str(int(exc.retry_after)))] if exc.retry_after else []
    return Rejected(429, exc.message, code=exc.code, headers=headers)


def header_map(scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in scope.get("headers", ()):
        name = key.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[name] = f"{headers[name]}, {text}" if name in headers else text
    return headers


def _allowed_hosts():
    hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not hosts:
        return [".localhost", "127.0.0.1", "[::1]"]
    return hosts


@lru_cache(maxsize=256)
def _host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def check_host_and_origin(headers: dict[str, str]):
    """DNS-rebinding defence: Host must be one of ALLOWED_HOSTS; a present Origin must be allowed."""
    host = headers.get("host", "")
    if not _host_allowed(host, tuple(_allowed_hosts())):
        raise Rejected(403, f"Forbidden: Host {host!r} is not allowed")
    origin = headers.get("origin")
    if origin is None:
        return
    allowed = mcp_settings.ALLOWED_ORIGINS
    if "*" in allowed or origin in allowed:
        return
    parts = urlsplit(origin) if origin != "null" else None
    if parts is not None and parts.netloc and parts.netloc.lower() == host.lower():
        return
    raise Rejected(403, f"Forbidden: Origin {origin!r} is not allowed")


CORS_ALLOW_HEADERS = "accept, authorization, content-type, last-event-id, mcp-protocol-version, mcp-session-id"
CORS_EXPOSE_HEADERS = "mcp-session-id"


def cors_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """For an allowed cross-origin request (after check_host_and_origin), what browsers need to see."""
    origin = headers.get("origin")
    if origin is None or urlsplit(origin).netloc.lower() == headers.get("host", "").lower():
        return []
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", CORS_EXPOSE_HEADERS.encode()),
        (b"vary", b"Origin"),
    ]


def is_preflight(method: str, headers: dict[str, str]) -> bool:
    return method == "OPTIONS" and "origin" in headers and "access-control-request-method" in headers


@lru_cache(maxsize=64)
def _media_types(accept: str) -> frozenset[str]:
    return frozenset(part.split(";")[0].strip().lower() for part in accept.split(",") if part.strip())


def accepts(headers: dict[str, str], media_type: str) -> bool:
    types = _media_types(headers.get("accept", ""))
    major = media_type.split("/")[0]
    return bool(types & {media_type, f"{major}/*", "*/*"})


def check_post_headers(headers: dict[str, str], json_only: bool):
    if not accepts(headers, "application/json") or not (json_only or accepts(headers, "text/event-stream")):
        wanted = "application/json" if json_only else "application/json and text/event-stream"
        raise Rejected(406, f"Not Acceptable: the client must accept {wanted}")
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise Rejected(415, "Unsupported Media Type: Content-Type must be application/json")


def check_get_headers(headers: dict[str, str]):
    if not accepts(headers, "text/event-stream"):
        raise Rejected(406, "Not Acceptable: the client must accept text/event-stream")


def check_protocol_version(headers: dict[str, str]):
    version = headers.get("mcp-protocol-version")
    if version is not None and version.strip() not in SUPPORTED_VERSIONS:
        raise Rejected(
            400,
            f"Bad Request: unsupported MCP-Protocol-Version {version!r}; supported: {', '.join(SUPPORTED_VERSIONS)}",
        )


def check_content_length(headers: dict[str, str]):
    length = headers.get("content-length")
    if length is not None:
        if not length.strip().isdigit():
            raise Rejected(400, "Bad Request: invalid Content-Length")
        if int(length) > mcp_settings.MAX_REQUEST_BYTES:
            raise Rejected(413, f"Payload Too Large: the limit is {mcp_settings.MAX_REQUEST_BYTES} bytes")

"""Who is calling: authentication backends listed in `AUTH_BACKENDS`, Django-style.

A backend is a class with `async authenticate(scope, headers) -> Principal | None`. The first
one that recognises the request wins. Built in: bearer tokens (`AccessToken`, stored hashed)
and Django's session cookie; django-oauth-toolkit's access tokens in `mcp_transport.oauth`. A
project adds its own (a JWT from its OAuth provider, say) the same way. A session belongs to
the principal that created it.

A token's scopes limit what it reaches (`@mcp.tool(scopes=[...])`); a principal whose
credentials carry no scopes (`scopes=None`: Django's login) is limited by its user's
permissions only, as a logged-in user is in the rest of the site.
"""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from importlib import import_module
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone
from django.utils.module_loading import import_string

from .conf import mcp_settings
from .storage.executor import executor

TOKEN_PREFIX = "mcp_"


@dataclass
class Principal:
    """An authenticated caller. `id` is what sessions are tied to; `scopes` what its token was
    granted, None when its credentials have no notion of scopes."""

    id: str
    user: object = None
    scopes: frozenset[str] | None = None
    via: str = ""

    def __post_init__(self):
        if self.scopes is not None:
            self.scopes = frozenset(self.scopes)


class AuthenticationFailed(Exception):
    """Credentials were given but are wrong (expired, revoked, unknown): 401 invalid_token."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(user, *, name: str = "", scopes=(), expires_in: timedelta | None = None):
    """A new bearer token for `user`: returns (the AccessToken row, the token, shown only once)."""
    from .models import AccessToken

    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = AccessToken.objects.create(
        user=user, name=name, prefix=token[:12], token_hash=hash_token(token), scopes=list(scopes),
        expires_at=timezone.now() + expires_in if expires_in else None,
    )
    return row, token


class BearerTokenBackend:
    """`Authorization: Bearer <token>` against AccessToken rows."""

    async def authenticate(self, scope, headers):
        value = headers.get("authorization", "")
        kind, _, token = value.partition(" ")
        if kind.lower() != "bearer":
            return None
        token = token.strip()
        if not token or len(token) > 512:
            raise AuthenticationFailed("malformed bearer token")
        found = await executor.run(_load_token, hash_token(token))
        if found is None:
            raise AuthenticationFailed("unknown, expired or revoked token")
        row, user = found
        return Principal(f"user:{user.pk}", user, row.scopes or (), via=f"token:{row.prefix}")


def _load_token(token_hash):
    from .models import AccessToken

    row = AccessToken.objects.usable().select_related("user").filter(token_hash=token_hash).first()
    if row is None or not row.user.is_active:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at > timedelta(minutes=1):
        AccessToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row, row.user


class SessionCookieBackend:
    """Django's own login: the session cookie of a logged-in user (a browser on the same site)."""

    async def authenticate(self, scope, headers):
        user = scope.get("user")
        if getattr(user, "is_authenticated", False):
            return Principal(f"user:{user.pk}", user, via="session")
        cookies = _cookies(headers.get("cookie", ""))
        session_key = cookies.get(settings.SESSION_COOKIE_NAME)
        if not session_key:
            return None
        user = await executor.run(_user_from_session, session_key)
        if user is None:
            return None
        return Principal(f"user:{user.pk}", user, via="session")


def _cookies(header: str) -> dict:
    from http.cookies import SimpleCookie

    jar = SimpleCookie()
    try:
        jar.load(header)
    except Exception:
        return {}
    return {key: morsel.value for key, morsel in jar.items()}


def _user_from_session(session_key):
    from django.contrib.auth import get_user

    engine = import_module(settings.SESSION_ENGINE)

    class Request:
        session = engine.SessionStore(session_key)

    user = get_user(Request())
    return user if user.is_authenticated else None


@lru_cache(maxsize=None)
def _backend(path: str):
    return import_string(path)()


def backends():
    return [_backend(path) for path in mcp_settings.AUTH_BACKENDS]


async def authenticate(scope, headers) -> Principal | None:
    """The principal of a request, None if anonymous; AuthenticationFailed on credentials no
    backend accepts (each is asked in turn: two may read bearer tokens, this app's and OAuth's)."""
    refused = None
    for backend in backends():
        try:
            principal = await backend.authenticate(scope, headers)
        except AuthenticationFailed as exc:
            refused = refused or exc
            continue
        if principal is not None:
            return principal
    if refused is not None:
        raise refused
    return None


def resource_origin(scope, headers: dict[str, str]) -> str:
    """scheme://host[:port] of this server as its clients name it: RESOURCE_ORIGIN, else the request's."""
    if mcp_settings.RESOURCE_ORIGIN:
        return mcp_settings.RESOURCE_ORIGIN.rstrip("/")
    return f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"


def bearer_challenge(**params) -> str:
    """A `WWW-Authenticate: Bearer ...` value (RFC 6750 3); parameters that are None are left out."""
    given = [f'{key}="{_quoted(value)}"' for key, value in params.items() if value is not None]
    return "Bearer " + ", ".join(given) if given else "Bearer"


def _quoted(value) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "")


def metadata_path(mcp_path: str) -> str:
    """RFC 9728: the protected resource metadata of https://h/mcp is at /.well-known/oauth-protected-resource/mcp."""
    return "/.well-known/oauth-protected-resource" + ("/" + mcp_path.strip("/") if mcp_path.strip("/") else "")


def authorization_servers(origin: str) -> list[str]:
    """The issuers that grant tokens for this server: AUTHORIZATION_SERVERS, else those the
    backends name (django-oauth-toolkit's, served by this project at `origin`)."""
    if mcp_settings.AUTHORIZATION_SERVERS:
        return list(mcp_settings.AUTHORIZATION_SERVERS)
    for backend in backends():
        named = getattr(backend, "authorization_servers", None)
        if named is not None:
            found = named(origin)
            if found:
                return list(found)
    return []


def resource_metadata(resource_url: str) -> dict:
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(resource_url))
    document = {
        "resource": resource_url,
        "authorization_servers": authorization_servers(origin),
        "bearer_methods_supported": ["header"],
    }
    if mcp_settings.SCOPES_SUPPORTED:
        document["scopes_supported"] = list(mcp_settings.SCOPES_SUPPORTED)
    return document

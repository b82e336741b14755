"""django-oauth-toolkit's access tokens as `AUTH_BACKENDS` entries (the `oauth` extra).

MCP servers are OAuth protected resources: they accept only tokens issued for them (RFC 8707
resource indicators; the toolkit keeps them in `AccessToken.resource`, an introspection
answer in `aud`). A token bound to no resource, or to another one, is refused, as are expired
and revoked ones (a revoked token's row is gone). The token's scopes become the principal's.

`OAuthToolkitBackend` reads the toolkit's tables (the project is its own authorization
server); `OAuthIntrospectionBackend` asks a remote authorization server about each token
(RFC 7662) at the toolkit's `RESOURCE_SERVER_INTROSPECTION_URL`, with its
`RESOURCE_SERVER_AUTH_TOKEN` or `RESOURCE_SERVER_INTROSPECTION_CREDENTIALS`.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import time

from django.urls import NoReverseMatch, reverse

from .auth import AuthenticationFailed, Principal, resource_origin
from .storage.executor import executor

logger = logging.getLogger("mcp_transport")

METADATA_MARKER = "/.well-known/oauth-authorization-server"
INTROSPECTION_TIMEOUT_SECONDS = 10


def bearer_token(headers) -> str | None:
    """The token of `Authorization: Bearer <token>`, None without one."""
    kind, _, token = headers.get("authorization", "").partition(" ")
    if kind.lower() != "bearer":
        return None
    token = token.strip()
    if not token or len(token) > 2048 or not token.isascii():
        raise AuthenticationFailed("malformed bearer token")
    return token


def resource_url(scope, headers) -> str:
    """This endpoint's URL as clients name it in their resource indicator (RFC 8707)."""
    path = scope.get("path", "").rstrip("/") or "/"
    return resource_origin(scope, headers) + path


def bound_to(audiences, resource: str) -> bool:
    """Whether a token's audiences name this resource, by the toolkit's resource validator
    (RESOURCE_SERVER_TOKEN_RESOURCE_VALIDATOR; a URL prefix match by default). A token bound
    to no resource is not bound to this one."""
    from oauth2_provider.settings import oauth2_settings

    if not audiences:
        return False
    validator = oauth2_settings.RESOURCE_SERVER_TOKEN_RESOURCE_VALIDATOR
    return bool(validator(resource, list(audiences))) if validator else resource in audiences


def principal_for(user, client_id: str | None, scope: str, via: str) -> Principal:
    """A token granted by a user acts as that user (the sessions it opens are theirs); a client's
    own token (client credentials) as the client."""
    scopes = scope.split()
    if user is not None:
        return Principal(f"user:{user.pk}", user, scopes, via=via)
    return Principal(f"oauth-client:{client_id}", None, scopes, via=via)


class OAuthToolkitBackend:
    """`Authorization: Bearer <token>` against the toolkit's AccessToken table."""

    async def authenticate(self, scope, headers):
        token = bearer_token(headers)
        if token is None:
            return None
        found = await executor.run(_load_access_token, token, resource_url(scope, headers))
        if isinstance(found, str):
            raise AuthenticationFailed(found)
        return found

    def authorization_servers(self, origin: str) -> list[str]:
        """The toolkit's issuer: its OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS or
        OIDC_ISS_ENDPOINT when set, else where its metadata view is routed in this project."""
        from oauth2_provider.settings import oauth2_settings

        if oauth2_settings.OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS:
            return list(oauth2_settings.OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS)
        if oauth2_settings.OIDC_ISS_ENDPOINT:
            return [oauth2_settings.OIDC_ISS_ENDPOINT]
        try:
            path = reverse("oauth2_provider:oauth-server-metadata")
        except NoReverseMatch:
            return []
        return [origin + path.partition(METADATA_MARKER)[0]]


def _load_access_token(token: str, resource: str):
    """The principal of a toolkit token, or why it is refused."""
    from oauth2_provider.models import get_access_token_model

    row = (get_access_token_model().objects.select_related("application", "user")
           .filter(token_checksum=hashlib.sha256(token.encode("utf-8")).hexdigest()).first())
    if row is None:
        return "unknown or revoked token"
    if row.is_expired():
        return "expired token"
    if not bound_to(row.resource, resource):
        return "the token was not issued for this resource"
    if row.user is not None and not row.user.is_active:
        return "the token's user is inactive"
    client_id = row.application.client_id if row.application is not None else None
    return principal_for(row.user, client_id, row.scope, via=f"oauth:{row.pk}")


class OAuthIntrospectionBackend(OAuthToolkitBackend):
    """Each bearer token asked about at a remote authorization server (RFC 7662), every request:
    a token revoked there is refused at the next one. Its user is the toolkit's user of the
    answer's `username` (created on first sight, as the toolkit's own resource server does)."""

    async def authenticate(self, scope, headers):
        token = bearer_token(headers)
        if token is None:
            return None
        answer = await asyncio.to_thread(_introspect, token)
        reason = _refusal(answer, resource_url(scope, headers))
        if reason:
            raise AuthenticationFailed(reason)
        user = None
        if isinstance(answer.get("username"), str) and answer["username"]:
            user = await executor.run(_user_from_answer, answer)
            if user is None:
                raise AuthenticationFailed("the token's user is inactive")
        client_id = answer.get("client_id") if isinstance(answer.get("client_id"), str) else None
        return principal_for(user, client_id, answer.get("scope") or "", via="oauth-introspection")

    def authorization_servers(self, origin: str) -> list[str]:
        from oauth2_provider.settings import oauth2_settings

        if oauth2_settings.OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS:
            return list(oauth2_settings.OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS)
        return [oauth2_settings.OIDC_ISS_ENDPOINT] if oauth2_settings.OIDC_ISS_ENDPOINT else []


def _introspect(token: str) -> dict:
    """The authorization server's answer about a token; {} when it could not be had."""
    import requests
    from oauth2_provider.settings import oauth2_settings

    url = oauth2_settings.RESOURCE_SERVER_INTROSPECTION_URL
    auth_token = oauth2_settings.RESOURCE_SERVER_AUTH_TOKEN
    credentials = oauth2_settings.RESOURCE_SERVER_INTROSPECTION_CREDENTIALS
    if not url:
        logger.error("OAuthIntrospectionBackend needs OAUTH2_PROVIDER['RESOURCE_SERVER_INTROSPECTION_URL']")
        return {}
    headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
    try:
        response = requests.post(url, data={"token": token}, headers=headers,
                                  auth=tuple(credentials) if credentials and not auth_token else None,
                                  timeout=INTROSPECTION_TIMEOUT_SECONDS)
        answer = response.json() if response.status_code == 200 else None
    except (requests.RequestException, ValueError):
        logger.exception("Token introspection at %s failed", url)
        return {}
    if not isinstance(answer, dict):
        logger.error("Token introspection at %s answered %s", url, response.status_code)
        return {}
    return answer


def _refusal(answer: dict, resource: str) -> str:
    """Why an introspection answer does not let its token in here ('' when it does)."""
    if answer.get("active") is not True:
        return "unknown, expired or revoked token"
    exp = answer.get("exp")
    if exp is not None and (not isinstance(exp, (int, float)) or isinstance(exp, bool) or exp <= time.time()):
        return "expired token"
    scope = answer.get("scope")
    if scope is not None and not isinstance(scope, str):
        return "malformed introspection answer (scope)"
    audiences = answer.get("aud")
    if isinstance(audiences, str):
        audiences = [audiences]
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        return "the token was not issued for this resource"
    if not bound_to(audiences, resource):
        return "the token was not issued for this resource"
    return ""


def _user_from_answer(answer: dict):
    from oauth2_provider.oauth2_validators import OAuth2Validator

    user = OAuth2Validator().get_or_create_user_from_content(answer)
    return user if user.is_active else None

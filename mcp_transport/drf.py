"""Django REST framework's authentication classes as an `AUTH_BACKENDS` entry, for projects that
already authenticate their API with them (`TokenAuthentication`, `SessionAuthentication`, or a
third-party class such as a JWT one).

    MCP_TRANSPORT = {"AUTH_BACKENDS": ["mcp_transport.drf.DRFAuthentication"]}

uses REST_FRAMEWORK's DEFAULT_AUTHENTICATION_CLASSES; a subclass naming `authentication_classes`
uses those instead. The classes see the request DRF's views would give them (a Django request built
from the ASGI scope, with the session and the lazy user Django's middlewares would have set; no
body), on the store's database thread, never on the event loop. Credentials a class refuses are a
401 `invalid_token`, as for every other backend; no credentials at all is anonymous (the next
backend, or REQUIRE_AUTH, decides).
"""
from __future__ import annotations

import io
from importlib import import_module

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.utils.functional import SimpleLazyObject

from .auth import AuthenticationFailed, Principal
from .storage.executor import executor


class DRFAuthentication:
    # None: REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]; else a list of classes.
    authentication_classes = None

    def authenticators(self) -> list:
        from rest_framework.settings import api_settings

        classes = self.authentication_classes
        return [cls() for cls in (api_settings.DEFAULT_AUTHENTICATION_CLASSES if classes is None else classes)]

    async def authenticate(self, scope, headers):
        refused, user, authenticator = await executor.run(self._authenticate, scope)
        if refused is not None:
            raise AuthenticationFailed(refused)
        if user is None:
            return None
        return Principal(f"user:{user.pk}", user, via=f"drf:{type(authenticator).__name__}")

    def _authenticate(self, scope) -> tuple[str | None, object, object]:
        """-> (why the credentials were refused, or None; the user, or None; the class that
        recognised them). Never raises for refused credentials: a batch of the database thread that
        raised would run again call by call."""
        from rest_framework import exceptions
        from rest_framework.request import Request

        request = Request(django_request(scope), authenticators=self.authenticators())
        try:
            user = request.user
        except exceptions.APIException as exc:
            return str(exc.detail), None, None
        if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", True):
            return None, None, None
        return None, user, request.successful_authenticator


def django_request(scope) -> ASGIRequest:
    """The Django request a view would get for this scope, as far as authentication looks: its
    headers (not those of a body: it has none), its session (from the cookie) and its lazily loaded user, as the session and
    authentication middlewares set them."""
    headers = [(name, value) for name, value in scope.get("headers", ())
               if name.lower() not in (b"content-length", b"content-type")]  # it has no body to parse
    request = ASGIRequest({**scope, "path": scope.get("path", "/"), "headers": headers}, io.BytesIO())
    engine = import_module(settings.SESSION_ENGINE)
    request.session = engine.SessionStore(request.COOKIES.get(settings.SESSION_COOKIE_NAME))

    def user():
        from django.contrib.auth import get_user

        return get_user(request)

    request.user = SimpleLazyObject(user)
    return request

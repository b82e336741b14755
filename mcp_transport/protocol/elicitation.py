"""URL-mode elicitation (2025-11-25, SEP-1036): sending the user to a page of the server's own.

What the user enters there never passes through the client; the client only asks the user's
consent to open the URL. On a session the request carries an `elicitationId`, which the server
may later announce done (`notifications/elicitation/complete`, to that session only), and a
request that cannot go on until the user has been there may fail with -32042 listing the URLs.
2026-07-28 has neither: the question is an input request without an id, and the retry of the
call is when the server looks whether the interaction is done.
"""
from __future__ import annotations

import re
import uuid
from urllib.parse import urlsplit

from . import jsonrpc

MAX_ELICITATION_ID = 200
MAX_URL = 8192
_UNPRINTABLE = re.compile(r"[\x00-\x20\x7f]")


def new_id() -> str:
    return str(uuid.uuid4())


def checked_id(elicitation_id) -> str:
    if (not isinstance(elicitation_id, str) or not 0 < len(elicitation_id) <= MAX_ELICITATION_ID
            or _UNPRINTABLE.search(elicitation_id.replace(" ", "x"))):
        raise ValueError(f"An elicitation id is 1-{MAX_ELICITATION_ID} printable characters, not {elicitation_id!r}")
    return elicitation_id


def checked_url(url) -> str:
    """An absolute http(s) URL with a host (the spec: a valid URL, which the user opens in a browser)."""
    if isinstance(url, str) and len(url) <= MAX_URL and not _UNPRINTABLE.search(url):
        parts = urlsplit(url)
        if parts.scheme in ("https", "http") and parts.hostname:
            return url
    raise ValueError(f"A URL elicitation needs an absolute http(s) URL, not {url!r}")


def url_params(message: str, url: str, elicitation_id: str | None) -> dict:
    """The params of a URL-mode `elicitation/create` (with its id on a session)."""
    if not isinstance(message, str):
        raise ValueError("An elicitation's message is a string")
    params = {"mode": "url", "message": message, "url": checked_url(url)}
    if elicitation_id is not None:
        params["elicitationId"] = checked_id(elicitation_id)
    return params


class URLElicitationRequired(jsonrpc.JSONRPCError):
    """The request cannot go on until the user has completed these URL elicitations (-32042)."""

    def __init__(self, elicitations: list[dict], message: str = "This request requires more information."):
        super().__init__(jsonrpc.URL_ELICITATION_REQUIRED, message, {"elicitations": elicitations})
        self.elicitations = elicitations

"""Multi round-trip requests (MCP 2026-07-28): a tool's questions to the client as results.

A modern request cannot ask the client anything while it runs. When a tool asks (elicitation,
sampling, roots) and the request carries no answer for it, the call ends with an
`input_required` result; the client asks its user, then sends the same request again with
the answers, and the tool runs again from the start. Its asks are numbered in the order it
makes them: on the retry, the asks already answered return their answers at once and the
first new one ends the call again. So a tool's work before an ask must be safe to repeat.

What the client must echo (`requestState`) is signed with Django's signing: the answers so far
and the asks awaiting an answer, bound to the principal, the method, the tool/prompt/resource
and a digest of the arguments, with an expiry. Any worker sharing the key can verify it.
"""
from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.core import signing

from ..conf import mcp_settings
from .jsonrpc import InvalidParams

SALT = "mcp_transport.request_state"
INPUT_METHODS = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
# Parameters that carry the previous round, not the request itself: they are not part of its digest.
ROUND_PARAMS = ("_meta", "inputResponses", "requestState")


class InputRequired(BaseException):
    """Ends a modern request with an `input_required` result. A BaseException, as a cancellation is:
    a tool's `except Exception` must not swallow it."""

    def __init__(self, requests: dict, state: str):
        super().__init__("input required")
        self.requests = requests
        self.state = state

    def result(self) -> dict:
        return {"resultType": "input_required", "inputRequests": self.requests, "requestState": self.state}


def _digest(value) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def binding(principal: str, method: str, params: dict) -> list:
    """What a request state is valid for: who, which method and target, which arguments."""
    target = params.get("name", params.get("uri", ""))
    salient = {k: v for k, v in params.items() if k not in ROUND_PARAMS}
    return [principal, method, target if isinstance(target, str) else "", _digest(salient)]


def _key() -> str:
    return mcp_settings.REQUEST_STATE_KEY or settings.SECRET_KEY


class Inputs:
    """The answers a modern request brings (verified), and the asks of this round."""

    def __init__(self, bound: list, answered: dict | None = None):
        self.bound = bound
        self.answered: dict[str, list] = answered or {}
        self.asked = 0

    @classmethod
    def from_request(cls, principal: str, method: str, params: dict) -> "Inputs":
        """Raises InvalidParams (-32602) for state that is forged, expired or someone else's."""
        bound = binding(principal, method, params)
        state = params.get("requestState")
        responses = params.get("inputResponses")
        if responses is not None and not isinstance(responses, dict):
            raise InvalidParams("Invalid params: 'inputResponses' must be an object")
        if state is None:
            return cls(bound)
        if not isinstance(state, str):
            raise InvalidParams("Invalid params: 'requestState' must be a string")
        try:
            payload = signing.loads(state, key=_key(), salt=SALT, max_age=mcp_settings.REQUEST_STATE_SECONDS)
        except signing.SignatureExpired:
            raise InvalidParams("Invalid params: requestState has expired; send the request without it") from None
        except signing.BadSignature:
            raise InvalidParams("Invalid params: requestState is not valid") from None
        if not isinstance(payload, dict) or payload.get("b") != bound:
            raise InvalidParams("Invalid params: requestState belongs to another request")
        answered = dict(payload.get("a") or {})
        for key, digest in (payload.get("p") or {}).items():
            response = (responses or {}).get(key)
            if isinstance(response, dict):
                answered[key] = [digest, response]
        return cls(bound, answered)

    def answer(self, method: str, params: dict | None) -> dict:
        """The client's answer to this ask, or InputRequired ending the round with it."""
        self.asked += 1
        key = f"{INPUT_METHODS[method]}-{self.asked}"
        ask = {"method": method, "params": params or {}}
        digest = _digest(ask)
        known = self.answered.get(key)
        if known is not None and known[0] == digest:
            return known[1]
        raise InputRequired({key: ask}, self.seal({key: digest}))

    def seal(self, pending: dict) -> str:
        answered = {k: v for k, v in self.answered.items() if int(k.rsplit("-", 1)[1]) < self.asked}
        payload = {"b": self.bound, "a": answered, "p": pending}
        return signing.dumps(payload, key=_key(), salt=SALT, compress=True)

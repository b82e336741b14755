"""Multi round-trip requests (MCP 2026-07-28): a tool's questions to the client as results.

A modern request cannot ask the client anything while it runs. When a tool asks (elicitation,
sampling, roots) and the request carries no answer for it, the call ends with an
`input_required` result; the client asks its user, then sends the same request again with the
answers, and the tool runs again from the start. On that retry the asks already answered return
their answers at once, and the first unanswered one ends the call again. So a tool's work before
an ask must be safe to repeat.

Each ask has a key: the tool's own (`ctx.ask({"user_name": ...})`, `ctx.elicit(..., key=...)`),
or one numbered in the order the tool asks. What the client must echo (`requestState`) is signed
with Django's signing: the answers so far and the asks awaiting an answer (each with a digest of
the question, so an answer is never reused for another question), bound to the principal, the
method, the tool/prompt/resource and a digest of its arguments, with an expiry. Any worker
sharing the key can verify it.
"""
from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.core import signing

from ..conf import mcp_settings
from .context import INPUT_CAPABILITIES, check_answer
from .jsonrpc import InvalidParams

SALT = "mcp_transport.request_state"
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


def check_response(key: str, method: str, response) -> dict:
    """The client's answer has the shape of the result its question asks for (-32602 if not)."""
    return check_answer(f"inputResponses.{key}", method, response)


class Inputs:
    """The answers a modern request brings (its state verified), for the tool's asks of this round."""

    def __init__(self, bound: list, responses: dict | None = None, answered: dict | None = None,
                 pending: dict | None = None):
        self.bound = bound
        self.responses = responses or {}
        self.answered: dict[str, list] = answered or {}
        # The asks the state says were sent, key -> digest; None without a state (a first round).
        self.pending = pending
        self.asked = 0

    @classmethod
    def from_request(cls, principal: str, method: str, params: dict) -> "Inputs":
        """Raises InvalidParams (-32602) for state that is forged, expired or someone else's."""
        bound = binding(principal, method, params)
        responses = params.get("inputResponses", {})
        if not isinstance(responses, dict):
            raise InvalidParams("Invalid params: 'inputResponses' must be an object")
        if "requestState" not in params:
            return cls(bound, responses)
        state = params["requestState"]
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
        return cls(bound, responses, dict(payload.get("a") or {}), dict(payload.get("p") or {}))

    def next_key(self, method: str) -> str:
        self.asked += 1
        return f"{INPUT_CAPABILITIES[method]}-{self.asked}"

    def answers(self, asks: dict[str, dict]) -> dict[str, dict]:
        """The client's answer to each ask ({key: {"method", "params"}}), or InputRequired ending
        the round with the ones it has not answered yet."""
        found, missing = {}, {}
        for key, ask in asks.items():
            digest = _digest(ask)
            known = self.answered.get(key)
            if known is not None and known[0] == digest:
                found[key] = known[1]
                continue
            response = self.responses.get(key)
            if response is not None and (self.pending is None or self.pending.get(key) == digest):
                found[key] = check_response(key, ask["method"], response)
                self.answered[key] = [digest, found[key]]
                continue
            missing[key] = (ask, digest)
        if missing:
            raise InputRequired({key: ask for key, (ask, _) in missing.items()},
                                self.seal({key: digest for key, (_, digest) in missing.items()}))
        return found

    def require(self, asks: dict[str, dict]):
        """End the round with these asks whatever answers came (the tool looks elsewhere whether
        what they ask for is done: a URL elicitation)."""
        raise InputRequired(asks, self.seal({key: _digest(ask) for key, ask in asks.items()}))

    def seal(self, pending: dict) -> str:
        payload = {"b": self.bound, "a": self.answered, "p": pending}
        return signing.dumps(payload, key=_key(), salt=SALT, compress=True)

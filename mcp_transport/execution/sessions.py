"""Sessions as the transport sees them: created by `initialize`, found by id, ended by DELETE."""
from __future__ import annotations

import secrets

from .. import metrics, signals
from ..storage import store
from .worker import worker


async def create(server_name: str, version: str, params: dict, user, principal: str, limit: int) -> str | None:
    """A new session's id; None when `principal` already holds `limit` active sessions."""
    session_id = secrets.token_hex(16)
    created = await store.acreate_session(
        session_id, server_name, version, params.get("clientInfo"), params.get("capabilities"),
        user.pk if getattr(user, "is_authenticated", False) else None, principal, limit,
    )
    if created is None:
        return None
    metrics.sessions_created.inc()
    if signals.session_created.receivers:
        await signals.session_created.asend(sender=None, server=server_name, session_id=session_id,
                                            principal=principal, client_info=params.get("clientInfo"))
    return session_id


async def load(session_id: str, server_name: str):
    """The live session with that id on that server, or None (unknown, expired, terminated)."""
    return await store.aget_session(session_id, server_name)


async def end(session):
    """DELETE: the session is terminated, its requests cancelled, every worker forgets it."""
    await store.aterminate_session(session.id, session.server)
    store.forget_session(session.id)
    worker.requests.cancel_session(session.id)
    worker.relay.session_ended(session.id)
    metrics.sessions_ended.labels("client").inc()
    if signals.session_ended.receivers:
        await signals.session_ended.asend(sender=None, server=session.server, session_id=session.id)

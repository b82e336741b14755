"""Sessions, streams and events: the database is the source of truth for every SSE event.

The state rules live here, once each, in two forms that agree: a Python rule on a row
(`Session.state_at`, `Stream.state_at`, `Worker.liveness_at`) and a query filter
(`Session.state_q`, `Stream.state_q`, `Worker.liveness_q`, and the QuerySet methods built on
them). Both compare with the same `Cutoffs`, taken once per page or command.
"""
import hashlib
import operator
from datetime import timedelta
from functools import cached_property, reduce

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .conf import mcp_settings
from .eventids import format_event_id


def idle_cutoff(now=None):
    """Sessions last seen before this have expired (SESSION_IDLE_TIMEOUT)."""
    return (now or timezone.now()) - timedelta(seconds=mcp_settings.SESSION_IDLE_TIMEOUT)


def retention_cutoff(now=None):
    """Streams finished before this are no longer replayable (EVENT_RETENTION_SECONDS)."""
    return (now or timezone.now()) - timedelta(seconds=mcp_settings.EVENT_RETENTION_SECONDS)


def heartbeat_cutoff(now=None):
    """Workers whose last heartbeat is older than this are stale (LEASE_SECONDS)."""
    return (now or timezone.now()) - timedelta(seconds=float(mcp_settings.LEASE_SECONDS))


class Cutoffs:
    """The instants every state rule compares with, taken at one `now` (each computed when first used).

    Take one per page or command (`Cutoffs.at()`) and hand it to the rules, so that every row
    shown and every filter or count of it agree.
    """

    def __init__(self, now=None):
        self.now = now or timezone.now()

    @classmethod
    def at(cls, now=None) -> "Cutoffs":
        return cls(now)

    @cached_property
    def idle(self):
        return idle_cutoff(self.now)

    @cached_property
    def retention(self):
        return retention_cutoff(self.now)

    @cached_property
    def heartbeat(self):
        return heartbeat_cutoff(self.now)

    @cached_property
    def running_workers(self) -> list[str]:
        """The ids of the workers not stale at this instant (`Worker.liveness_at`), read once: only
        a connection one of them holds is a connection (`Stream.state_at`'s `alive_workers`)."""
        return list(Worker.objects.running(self).values_list("id", flat=True))


def _cutoffs(cutoffs: Cutoffs | None) -> Cutoffs:
    return cutoffs if cutoffs is not None else Cutoffs()


def _any(conditions) -> Q:
    """Any of these conditions (none: nothing matches)."""
    conditions = list(conditions)
    return reduce(operator.or_, conditions) if conditions else Q(pk__in=[])


class SessionQuerySet(models.QuerySet):
    def in_state(self, *states, cutoffs: Cutoffs | None = None):
        """Sessions in any of these states (`Session.State`)."""
        cutoffs = _cutoffs(cutoffs)
        return self.filter(_any(Session.state_q(state, cutoffs) for state in states))

    def active(self, cutoffs: Cutoffs | None = None):
        return self.filter(Session.state_q(Session.State.ACTIVE, _cutoffs(cutoffs)))

    def expired(self, cutoffs: Cutoffs | None = None):
        return self.filter(Session.state_q(Session.State.EXPIRED, _cutoffs(cutoffs)))

    def terminated(self, cutoffs: Cutoffs | None = None):
        return self.filter(Session.state_q(Session.State.TERMINATED, _cutoffs(cutoffs)))

    def prunable(self, cutoffs: Cutoffs | None = None):
        """Expired, or terminated longer ago than the event retention: what `mcp_prune` deletes."""
        cutoffs = _cutoffs(cutoffs)
        return self.filter(Q(last_seen_at__lt=cutoffs.idle) | Q(terminated_at__lt=cutoffs.retention))


class Session(models.Model):
    """One MCP session (`Mcp-Session-Id`), created by `initialize`."""

    id = models.CharField(max_length=64, primary_key=True)
    server = models.CharField(max_length=100, default="default")
    protocol_version = models.CharField(max_length=20)
    client_name = models.CharField(max_length=200, blank=True)
    client_version = models.CharField(max_length=100, blank=True)
    client_capabilities = models.JSONField(default=dict, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    log_level = models.CharField(max_length=16, blank=True)
    principal = models.CharField(
        max_length=200, blank=True, db_index=True,
        help_text="Who created the session (e.g. user:42, token:abcd1234); only they may use it",
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now, db_index=True)
    terminated_at = models.DateTimeField(null=True, blank=True)

    objects = SessionQuerySet.as_manager()

    class State(models.TextChoices):
        ACTIVE = "active"
        EXPIRED = "expired", "Expired (idle)"  # last seen longer ago than SESSION_IDLE_TIMEOUT
        TERMINATED = "terminated"  # DELETE, or an operator

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.id

    def state_at(self, cutoffs: Cutoffs) -> "Session.State":
        """The rule; `state_q` is the same rule as a query filter."""
        if self.terminated_at is not None:
            return Session.State.TERMINATED
        if self.last_seen_at < cutoffs.idle:
            return Session.State.EXPIRED
        return Session.State.ACTIVE

    @property
    def state(self) -> "Session.State":
        return self.state_at(Cutoffs())

    @staticmethod
    def state_q(state: str, cutoffs: Cutoffs, prefix: str = "") -> Q:
        """`state_at` as a filter; `prefix` ("session__") applies it to a related session."""
        def q(**lookups):
            return Q(**{prefix + name: value for name, value in lookups.items()})

        if state == Session.State.TERMINATED:
            return q(terminated_at__isnull=False)
        if state == Session.State.EXPIRED:
            return q(terminated_at__isnull=True, last_seen_at__lt=cutoffs.idle)
        if state == Session.State.ACTIVE:
            return q(terminated_at__isnull=True, last_seen_at__gte=cutoffs.idle)
        raise ValueError(f"Unknown session state {state!r}")


class StreamQuerySet(models.QuerySet):
    def open(self):
        return self.filter(status=Stream.Status.OPEN)

    def in_state(self, *states, cutoffs: Cutoffs | None = None, alive_workers=None):
        """Streams in any of these states (`Stream.State`); see `Stream.state_at` for `alive_workers`."""
        cutoffs = _cutoffs(cutoffs)
        return self.filter(_any(Stream.state_q(state, cutoffs, alive_workers) for state in states))

    def replayable(self, cutoffs: Cutoffs | None = None):
        """Finished within EVENT_RETENTION_SECONDS in an active session: what a client may still
        replay with Last-Event-ID (a terminated session's streams show how they ended, unreplayable)."""
        cutoffs = _cutoffs(cutoffs)
        return self.in_state(Stream.State.COMPLETED, Stream.State.FAILED, Stream.State.CANCELLED,
                             cutoffs=cutoffs).filter(Session.state_q(Session.State.ACTIVE, cutoffs, prefix="session__"))

    def orphaned(self, cutoffs: Cutoffs | None = None):
        """Open requests whose lease ran out: their worker is gone (`Stream.orphaned_at`)."""
        return self.filter(Stream.orphaned_q(_cutoffs(cutoffs)))

    def past_retention(self, cutoffs: Cutoffs | None = None):
        """Finished longer ago than EVENT_RETENTION_SECONDS, whatever their session: what `mcp_prune`
        deletes with the prunable sessions' streams."""
        return self.filter(finished_at__lt=_cutoffs(cutoffs).retention)


class Stream(models.Model):
    """An SSE stream: one per JSON-RPC request answered with SSE, plus the session's GET stream."""

    class Kind(models.TextChoices):
        REQUEST = "request"
        STANDALONE = "standalone"

    class Status(models.TextChoices):
        OPEN = "open"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.BigAutoField(primary_key=True)
    # Looked up through the (session, kind) index: a second index on session alone is only written.
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="streams", db_index=False)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.REQUEST)
    method = models.CharField(max_length=100, blank=True)
    tool_name = models.CharField(max_length=200, blank=True)
    # Text: JSON-RPC sets no length on an id, and the request's body limit bounds it.
    request_id = models.TextField(blank=True, help_text="JSON-encoded JSON-RPC id")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    last_seq = models.PositiveIntegerField(default=0)
    last_event_at = models.DateTimeField(null=True, blank=True)
    reconnects = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=100, blank=True, help_text="The worker running the request")
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Renewed by the running worker; past it, the worker is gone"
    )
    connected_worker = models.CharField(
        max_length=100, blank=True, help_text="The worker holding the live connection, if any"
    )
    connected_at = models.DateTimeField(null=True, blank=True)
    disconnect_policy = models.CharField(max_length=200, blank=True)
    retry_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)

    objects = StreamQuerySet.as_manager()

    class State(models.TextChoices):
        """What an operator sees: the status, and whether a client can still come back to it."""

        CONNECTED = "connected now"  # open, and a connection holds it
        RESUMABLE = "resumable"  # open, no connection, its session active: resume with Last-Event-ID
        COMPLETED = "completed"  # finished, within its retention (replayable while its session is active)
        FAILED = "failed"
        CANCELLED = "cancelled"
        EXPIRED = "expired"  # past its retention, its session idle, or open in a terminated session: 404

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["session", "kind"], name="mcp_stream_session_kind")]

    def __str__(self):
        return f"{self.kind} stream {self.id}"

    @property
    def finished(self):
        return self.status != self.Status.OPEN

    def state_at(self, cutoffs: Cutoffs, alive_workers=None) -> "Stream.State":
        """The rule (it reads `self.session`); `state_q` is the same rule as a query filter.

        A connection counts as the row records it (`connected_worker`); given `alive_workers` (the
        ids of the workers not stale, `Cutoffs.running_workers`), only a connection held by one of
        them counts. A finished stream shows how it ended until its retention ends, also when its
        client DELETEd the session (what normal clients do at exit); an idle session's streams are
        expired (`mcp_prune` deletes them with it).
        """
        session_state = self.session.state_at(cutoffs)
        if self.status == Stream.Status.OPEN:
            if self.connected_worker and (alive_workers is None or self.connected_worker in alive_workers):
                return Stream.State.CONNECTED
            return Stream.State.RESUMABLE if session_state == Session.State.ACTIVE else Stream.State.EXPIRED
        if session_state == Session.State.EXPIRED or (
                self.finished_at is not None and self.finished_at < cutoffs.retention):
            return Stream.State.EXPIRED
        return Stream.State(self.status)

    @staticmethod
    def state_q(state: str, cutoffs: Cutoffs, alive_workers=None) -> Q:
        """`state_at` as a filter (joining the session)."""
        is_open = Q(status=Stream.Status.OPEN)
        if alive_workers is None:
            held, not_held = ~Q(connected_worker=""), Q(connected_worker="")
        else:
            alive_workers = list(alive_workers)
            held, not_held = Q(connected_worker__in=alive_workers), ~Q(connected_worker__in=alive_workers)
        session_active = Session.state_q(Session.State.ACTIVE, cutoffs, prefix="session__")
        session_idle = Session.state_q(Session.State.EXPIRED, cutoffs, prefix="session__")
        session_terminated = Session.state_q(Session.State.TERMINATED, cutoffs, prefix="session__")
        if state == Stream.State.CONNECTED:
            return is_open & held
        if state == Stream.State.RESUMABLE:
            return is_open & not_held & session_active
        if state == Stream.State.EXPIRED:
            finished = ~Q(status=Stream.Status.OPEN)
            return ((is_open & not_held & (session_idle | session_terminated))
                    | (finished & (session_idle | Q(finished_at__lt=cutoffs.retention))))
        if state in (Stream.State.COMPLETED, Stream.State.FAILED, Stream.State.CANCELLED):
            within = Q(finished_at__isnull=True) | Q(finished_at__gte=cutoffs.retention)
            return Q(status=state) & (session_active | session_terminated) & within
        raise ValueError(f"Unknown stream state {state!r}")

    def orphaned_at(self, cutoffs: Cutoffs) -> bool:
        """An open request whose lease ran out: its worker stopped renewing it. (The lease sweep,
        `storage.store.fail_orphans`, ends such requests with an error.)"""
        return (self.status == Stream.Status.OPEN and self.kind == Stream.Kind.REQUEST
                and self.lease_expires_at is not None and self.lease_expires_at < cutoffs.now)

    @staticmethod
    def orphaned_q(cutoffs: Cutoffs) -> Q:
        """`orphaned_at` as a filter."""
        return Q(status=Stream.Status.OPEN, kind=Stream.Kind.REQUEST, lease_expires_at__lt=cutoffs.now)


class Event(models.Model):
    """One SSE event, stored before it is sent. Its SSE id is `<stream id>-<seq>`."""

    class Kind(models.TextChoices):
        PRIMING = "priming"
        MESSAGE = "message"
        FINAL = "final"

    id = models.BigAutoField(primary_key=True)
    # Looked up through the unique (stream, seq) index: a second index on stream alone is only written.
    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.MESSAGE)
    payload = models.TextField(blank=True, help_text="The JSON-RPC message exactly as sent")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["stream", "seq"]
        constraints = [models.UniqueConstraint(fields=["stream", "seq"], name="mcp_event_stream_seq")]

    def __str__(self):
        return self.event_id

    @property
    def event_id(self):
        return format_event_id(self.stream_id, self.seq)


class StreamConnection(models.Model):
    """A connection of a stream that ended before the stream did, or a resumption: the timeline."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="connections")
    worker = models.CharField(max_length=100, blank=True)
    opened_at = models.DateTimeField(default=timezone.now)
    closed_at = models.DateTimeField(null=True, blank=True)
    resumed_from = models.PositiveIntegerField(null=True, blank=True, help_text="Last-Event-ID seq")
    close_reason = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ["stream", "opened_at", "id"]


class WorkerQuerySet(models.QuerySet):
    def in_liveness(self, *states, cutoffs: Cutoffs | None = None):
        cutoffs = _cutoffs(cutoffs)
        return self.filter(_any(Worker.liveness_q(state, cutoffs) for state in states))

    def alive(self, cutoffs: Cutoffs | None = None):
        return self.in_liveness(Worker.Liveness.ALIVE, cutoffs=cutoffs)

    def stopping(self, cutoffs: Cutoffs | None = None):
        return self.in_liveness(Worker.Liveness.STOPPING, cutoffs=cutoffs)

    def stale(self, cutoffs: Cutoffs | None = None):
        return self.in_liveness(Worker.Liveness.STALE, cutoffs=cutoffs)

    def running(self, cutoffs: Cutoffs | None = None):
        """Not stale (alive or stopping): its connections and requests are still there."""
        return self.in_liveness(Worker.Liveness.ALIVE, Worker.Liveness.STOPPING, cutoffs=cutoffs)


class Worker(models.Model):
    """A daphne process serving MCP, with its heartbeat."""

    id = models.CharField(max_length=100, primary_key=True)
    host = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    heartbeat_at = models.DateTimeField(default=timezone.now, db_index=True)
    stopping = models.BooleanField(default=False)

    objects = WorkerQuerySet.as_manager()

    class Liveness(models.TextChoices):
        ALIVE = "alive"  # heartbeat within LEASE_SECONDS
        STOPPING = "stopping"  # heartbeat within LEASE_SECONDS, draining after SIGTERM
        STALE = "stale"  # silent for over LEASE_SECONDS (whether it was stopping or not): gone

    def __str__(self):
        return self.id

    def liveness_at(self, cutoffs: Cutoffs) -> "Worker.Liveness":
        """The rule; `liveness_q` is the same rule as a query filter."""
        if self.heartbeat_at < cutoffs.heartbeat:
            return Worker.Liveness.STALE
        return Worker.Liveness.STOPPING if self.stopping else Worker.Liveness.ALIVE

    @property
    def liveness(self) -> "Worker.Liveness":
        return self.liveness_at(Cutoffs())

    @staticmethod
    def liveness_q(state: str, cutoffs: Cutoffs) -> Q:
        if state == Worker.Liveness.STALE:
            return Q(heartbeat_at__lt=cutoffs.heartbeat)
        if state == Worker.Liveness.STOPPING:
            return Q(heartbeat_at__gte=cutoffs.heartbeat, stopping=True)
        if state == Worker.Liveness.ALIVE:
            return Q(heartbeat_at__gte=cutoffs.heartbeat, stopping=False)
        raise ValueError(f"Unknown worker liveness {state!r}")


class ModernRequestQuerySet(models.QuerySet):
    def on_running_workers(self, cutoffs: Cutoffs | None = None):
        """Held by a worker that is alive or stopping: the rest went with their worker."""
        return self.filter(worker__in=Worker.objects.running(cutoffs).values("id"))

    def orphaned(self, cutoffs: Cutoffs | None = None):
        return self.exclude(worker__in=Worker.objects.running(cutoffs).values("id"))


class ModernRequest(models.Model):
    """A 2026-07-28 request a worker holds open: a `subscriptions/listen` stream, or a call that
    has been running for a while (quick calls are never written). The row lives as long as the
    request; nothing of the request's messages is stored (that revision resumes nothing)."""

    class Kind(models.TextChoices):
        LISTEN = "listen", "listen stream"
        CALL = "call", "call"

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    server = models.CharField(max_length=100, default="default")
    worker = models.CharField(max_length=100, db_index=True, help_text="The worker holding it")
    method = models.CharField(max_length=100)
    name = models.TextField(blank=True, help_text="The tool or prompt name, or the resource URI")
    request_id = models.TextField(blank=True, help_text="JSON-encoded JSON-RPC id")
    principal = models.CharField(max_length=200, blank=True, db_index=True)
    client_name = models.CharField(max_length=200, blank=True)
    client_version = models.CharField(max_length=100, blank=True)
    notifications = models.JSONField(default=dict, blank=True, help_text="A listen stream's agreed filter")
    started_at = models.DateTimeField(default=timezone.now)

    objects = ModernRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]
        verbose_name = "modern request"
        verbose_name_plural = "modern requests (2026-07-28)"

    def __str__(self):
        return f"{self.get_kind_display()} {self.method} {self.name}".strip()


class TaskQuerySet(models.QuerySet):
    def active(self):
        return self.filter(status__in=Task.ACTIVE)

    def orphaned(self, now=None):
        """Active tasks whose worker stopped renewing their lease: gone with it."""
        return self.active().filter(lease_expires_at__lt=now or timezone.now())

    def expired(self, now=None):
        return self.filter(expires_at__lt=now or timezone.now())


class Task(models.Model):
    """A tool call run as a task: its state, its answer, the questions it waits on. Any worker
    answers for it; the worker running it renews its lease. JSON columns are text (`jsonrpc.dumps`):
    what a tool or a client sends may hold characters a JSON column refuses (NUL on PostgreSQL)."""

    class Status(models.TextChoices):
        WORKING = "working"
        INPUT_REQUIRED = "input_required", "Input required"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE = (Status.WORKING, Status.INPUT_REQUIRED)

    id = models.CharField(max_length=64, primary_key=True)
    server = models.CharField(max_length=100, default="default")
    principal = models.CharField(max_length=200, blank=True, db_index=True,
                                 help_text="Who created it; only they may see it")
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+", help_text="Whom the tool runs for (ctx.user), wherever it runs")
    method = models.CharField(max_length=100, default="tools/call")
    tool = models.CharField(max_length=200, blank=True)
    request = models.TextField(help_text="JSON: the request's params (its arguments), what the task runs")
    client_capabilities = models.TextField(default="{}", help_text="JSON: what the client declared")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.WORKING, db_index=True)
    status_message = models.TextField(blank=True)
    result = models.TextField(blank=True, help_text="JSON: the tool's result, once completed")
    error = models.TextField(blank=True, help_text="JSON: the JSON-RPC error, once failed")
    input_requests = models.TextField(default="{}", help_text="JSON: the questions waiting for an answer")
    input_responses = models.TextField(default="{}", help_text="JSON: the answers received")
    ttl_ms = models.BigIntegerField(null=True, blank=True)
    poll_interval_ms = models.PositiveIntegerField(default=1000)
    runner = models.CharField(max_length=32, default="process")
    worker = models.CharField(max_length=100, blank=True, db_index=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"task {self.pk} ({self.tool}, {self.status})"

    @property
    def terminal(self) -> bool:
        return self.status not in Task.ACTIVE

    def may_be_remembered(self) -> bool:
        """Whether the web process running it may answer its polls from memory
        (`storage.recent.WorkingTasks`): never past its lease, which outlasts that memory."""
        return (self.runner == "process" and bool(self.worker) and self.lease_expires_at is not None
                and self.lease_expires_at > timezone.now())


class TaskEvent(models.Model):
    """A message about a task, stored against it whichever era and runner: the progress and log
    messages its tool sent, the questions it asked, its status changes. The admin draws a task's
    timeline from them (indexed by task); they are deleted with their task."""

    class Kind(models.TextChoices):
        MESSAGE = "message"  # a notification the tool sent: progress, a log message
        QUESTION = "question"
        STATUS = "status"

    id = models.BigAutoField(primary_key=True)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events", db_index=False)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.MESSAGE)
    payload = models.TextField(help_text="JSON: the message as sent, the questions asked, or the new status")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["task", "id"], name="mcp_taskevent_task")]

    def __str__(self):
        return f"{self.kind} event {self.pk} of task {self.task_id}"


class Delivery(models.Model):
    """A message for one worker that must not be lost with a channel-layer message: a client's
    answer to a tool's request, or a cancellation. The worker's sweep reads what the relay missed."""

    class Kind(models.TextChoices):
        RESPONSE = "response"
        CANCEL = "cancel"

    worker = models.CharField(max_length=100, db_index=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    payload = models.TextField(help_text="JSON: the client's response, or the cancel's request id, reason and by")
    created_at = models.DateTimeField(default=timezone.now)


def hash_uri(uri: str) -> str:
    """What a Subscription is found by: the URI's SHA-256 (hex). A URI can be longer than an index
    key may be (InnoDB: 3072 bytes), and a column's collation may fold case and trailing spaces
    (MariaDB's default): the hash matches the URI exactly, on every database."""
    return hashlib.sha256(uri.encode("utf-8", "surrogatepass")).hexdigest()


class Subscription(models.Model):
    """A `resources/subscribe` of a session; updates go to its standalone GET stream."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="subscriptions")
    uri = models.TextField()
    uri_hash = models.CharField(max_length=64, help_text="SHA-256 of the URI (hex), what lookups use")

    class Meta:
        # Also the index of the lookup by URI (the sessions to notify of an update).
        constraints = [models.UniqueConstraint(fields=["uri_hash", "session"], name="mcp_subscription_uri_session")]


def elicitation_key(server: str, elicitation_id: str) -> str:
    """What an Elicitation is found by: SHA-256 (hex) of its server and id, exact on every
    database (a folding collation would take "A" for "a")."""
    return hash_uri(f"{server}\x00{elicitation_id}")


class ElicitationQuerySet(models.QuerySet):
    def prunable(self, cutoffs: Cutoffs | None = None):
        """A 2026-07-28 request's, started longer ago than SESSION_IDLE_TIMEOUT (a session's go with it)."""
        return self.filter(session__isnull=True, created_at__lt=_cutoffs(cutoffs).idle)


class Elicitation(models.Model):
    """A URL-mode elicitation a tool started: whom it belongs to (the session on 2025-11-25, the
    principal in both revisions) and whether the project has said it is done. Announcing it done
    (`mcp_transport.complete_elicitation`) tells that session only."""

    key = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the server and the elicitation id (hex)")
    server = models.CharField(max_length=100, default="default")
    elicitation_id = models.TextField()
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="elicitations", help_text="None: asked by a 2026-07-28 request")
    principal = models.CharField(max_length=200, blank=True, db_index=True)
    url = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    objects = ElicitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.elicitation_id


class AccessTokenQuerySet(models.QuerySet):
    def usable(self):
        now = timezone.now()
        unexpired = models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        return self.filter(unexpired, revoked_at__isnull=True)


class AccessToken(models.Model):
    """A bearer token for the MCP endpoint, tied to a Django user. Only its SHA-256 is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_tokens")
    name = models.CharField(max_length=200, blank=True, help_text="What the token is for")
    prefix = models.CharField(max_length=12, db_index=True, help_text="The first characters, to recognise it")
    token_hash = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = AccessTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.prefix}… ({self.name or self.user})"

    @property
    def usable(self):
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > timezone.now())

"""Sessions, streams and events: the database is the source of truth for every SSE event."""
import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from .conf import mcp_settings
from .eventids import format_event_id


def idle_cutoff(now=None):
    """Sessions last seen before this have expired (SESSION_IDLE_TIMEOUT)."""
    return (now or timezone.now()) - timedelta(seconds=mcp_settings.SESSION_IDLE_TIMEOUT)


def retention_cutoff(now=None):
    """Streams finished before this are no longer replayable (EVENT_RETENTION_SECONDS)."""
    return (now or timezone.now()) - timedelta(seconds=mcp_settings.EVENT_RETENTION_SECONDS)


class SessionQuerySet(models.QuerySet):
    def active(self):
        return self.filter(terminated_at__isnull=True, last_seen_at__gte=idle_cutoff())

    def expired(self):
        return self.filter(terminated_at__isnull=True, last_seen_at__lt=idle_cutoff())

    def terminated(self):
        return self.filter(terminated_at__isnull=False)

    def prunable(self):
        """Expired, or terminated longer ago than the event retention: what `mcp_prune` deletes."""
        return self.filter(models.Q(last_seen_at__lt=idle_cutoff()) | models.Q(terminated_at__lt=retention_cutoff()))


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

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.id

    @property
    def state(self):
        if self.terminated_at:
            return "terminated"
        if self.last_seen_at < idle_cutoff():
            return "expired"
        return "active"


class StreamQuerySet(models.QuerySet):
    def open(self):
        return self.filter(status=Stream.Status.OPEN)

    def resumable(self):
        return self.filter(session__terminated_at__isnull=True).filter(
            models.Q(status=Stream.Status.OPEN) | models.Q(finished_at__gte=retention_cutoff())
        )

    def expired(self):
        return self.filter(finished_at__lt=retention_cutoff())


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
    request_id = models.CharField(max_length=200, blank=True, help_text="JSON-encoded JSON-RPC id")
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

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["session", "kind"], name="mcp_stream_session_kind")]

    def __str__(self):
        return f"{self.kind} stream {self.id}"

    @property
    def finished(self):
        return self.status != self.Status.OPEN


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


class Worker(models.Model):
    """A daphne process serving MCP, with its heartbeat."""

    id = models.CharField(max_length=100, primary_key=True)
    host = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    heartbeat_at = models.DateTimeField(default=timezone.now, db_index=True)
    stopping = models.BooleanField(default=False)

    def __str__(self):
        return self.id


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

"""Durable streams: the event store, wake-ups between connections, in-flight requests."""

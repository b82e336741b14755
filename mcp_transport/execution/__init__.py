"""Request execution: requests in flight and their outboxes, leases and heartbeat, graceful shutdown."""

"""Wake-ups: this process's connections (bus) and the channel-layer link between workers (relay)."""

"""cycle.store."""

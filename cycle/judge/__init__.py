"""cycle.judge."""

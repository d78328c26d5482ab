"""cycle.tui."""

"""cycle.improve."""

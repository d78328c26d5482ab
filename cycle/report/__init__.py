"""cycle.report."""

"""cycle.evals.formats."""

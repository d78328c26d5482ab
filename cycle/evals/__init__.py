"""cycle.evals."""

"""cycle.testing."""

"""cycle.tui.screens."""

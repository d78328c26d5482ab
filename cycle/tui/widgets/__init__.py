"""cycle.tui.widgets."""

"""cycle.llm."""

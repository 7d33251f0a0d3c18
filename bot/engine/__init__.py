"""The turn engine: one turn's session, context window, tool loop, summaries and errors."""

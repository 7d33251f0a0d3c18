"""Benchmarks of the bot's own cost (not part of the test command)."""

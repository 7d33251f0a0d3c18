"""Routers per feature: commands, text turns, other messages, errors."""

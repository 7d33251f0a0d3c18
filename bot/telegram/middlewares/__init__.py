"""Cross-cutting steps every update goes through before its handler."""

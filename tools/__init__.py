"""The tool mechanism (registry, executor, context) and the read-only support tools."""

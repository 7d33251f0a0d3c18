"""A shop's MCP servers: one session each, their tools offered in the registry."""

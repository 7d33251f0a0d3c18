"""A shop's MCP tools as registry tools: schema translation and validation, results, cards."""

"""Chat model clients: the OpenAI-compatible one and the offline demo model."""

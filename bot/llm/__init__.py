"""The chat model client (OpenAI-compatible); the offline demo model is in bot/tryout/."""

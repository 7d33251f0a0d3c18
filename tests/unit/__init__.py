"""Unit tests of the core engine: tools, executor, tool loop, prompts, LLM clients."""

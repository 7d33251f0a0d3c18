"""``python -m bot eval``: scenario files run through the bot's real turn path, with verdicts."""

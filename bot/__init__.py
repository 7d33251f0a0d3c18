"""The support bot application: settings, engine wiring, Redis, Telegram and the CLIs."""

"""The audit trail: what the bot did, for support staff (never arguments or message text)."""

"""The request analysis: what a conversation is about and how it went, for staff and the numbers."""

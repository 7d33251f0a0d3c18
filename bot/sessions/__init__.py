"""Conversation sessions: the stored model, the store seam and its Redis implementation."""

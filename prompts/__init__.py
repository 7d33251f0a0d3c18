"""Versioned prompt templates."""

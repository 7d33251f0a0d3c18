"""The request analysis instruction (what the customer asked, how it went, what staff do next).

One ``<version>.txt`` body per version, never edited once shipped.

- 1.0.0: category, sentiment, urgency, language, resolved, a summary of one or two
  Russian sentences for staff and the first step for staff; the conversation is data.
- 1.1.0: as 1.0.0, and the quality of a conversation the bot handled alone: a score of
  1-5 and the rubric's failed criteria (names only).
"""

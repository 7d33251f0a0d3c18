"""The conversation summary instruction (fold old turns into a short factual summary).

One ``<version>.txt`` body per version, never edited once shipped.

- 1.0.0: a summary of at most 120 words, facts from the input only.
- 1.1.0: 1.0.0 plus the rule for tag look-alikes. Tags of the summary's blocks
  are neutralised in the customer's text before it is sent, and in the summary
  the model writes; the prompt says so.
"""

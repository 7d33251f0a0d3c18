"""The staff suggestion instruction: a reply a support person may send as it is.

One ``<version>.txt`` body per version, never edited once shipped.

- 1.0.0: a draft for staff in the customer's language (``${language}``), facts only from
  the read tools and the help center, a write tool called only to propose its card.
"""

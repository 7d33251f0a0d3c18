"""The support staff's CLI (support-audit) and its readers of the audit stream."""

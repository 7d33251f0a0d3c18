"""One suite per seam (Protocol), run against every implementation of it."""

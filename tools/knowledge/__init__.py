"""The help center: articles as files, a search index over them, rebuilt when they change."""

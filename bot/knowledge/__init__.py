"""The help center in a bot process and its authors' CLI."""

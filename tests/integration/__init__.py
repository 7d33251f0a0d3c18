"""Integration tests over real sockets."""

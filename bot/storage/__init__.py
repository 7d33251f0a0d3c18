"""Redis: the connection, every key (keys.py), health checks and every Lua script."""

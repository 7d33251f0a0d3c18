"""Shop backends the application ships: the demo shop in Redis (see :mod:`tools.shop_backend`)."""

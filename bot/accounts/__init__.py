"""Who the customer is in the shop: account linking by a contact the customer shared.

- :mod:`~bot.accounts.directory`: :class:`CustomerDirectory`, the lookup of a shop
  customer by phone number (the demo shop's today; an MCP server's tool next).
- :mod:`~bot.accounts.linking`: :class:`AccountLinking`, what ``/link`` and a shared
  contact do inside a worker's job (the session keeps the shop's customer id).
"""

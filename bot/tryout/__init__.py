"""The try-out: what lets anyone run the bot with nothing set, and what production never needs.

``python -m bot console`` with no settings answers with these parts, and so do
``LLM_BACKEND=offline``, ``python -m bot shop-mcp`` and ``python -m bot eval``:

- :mod:`~bot.tryout.model`: the offline model (``LLM_BACKEND=offline``, and the
  console's choice without ``OPENAI_API_KEY``), keyword rules that pick the tools;
- :mod:`~bot.tryout.analyst`: the offline analyst, the request analysis from the
  conversation's words for the offline model;
- :mod:`~bot.tryout.demo_shop`: the demo shop in Redis, each customer's copy of
  ``demo_shop.json``'s orders, which the built-in order tools change;
- :mod:`~bot.tryout.demo_shop_mcp`: the same shop as an MCP server (``python -m bot
  shop-mcp``), the worked example of a shop's own server;
- :mod:`~bot.tryout.local_redis`: a private redis-server for the console, the
  eval and the staff CLI when ``REDIS_URL`` is unset;
- the demo data: ``demo_shop.json`` (``TOOL_DATA_PATH``'s default) and
  ``help_center/`` (``KNOWLEDGE_DIR``'s default), named by path in
  :mod:`bot.settings` (``DEMO_SHOP_DATA``, ``DEMO_HELP_CENTER``) and shipped as
  package data.

A deployment sets ``OPENAI_API_KEY``, ``REDIS_URL``, its shop's MCP server and its
own help center, and then runs none of this code. Only the composition root
(``bot.app``), the front ends that start the try-out (``bot.console``,
``bot.evaluation``, ``bot.__main__``) and the staff CLI's private Redis
(``bot.support_audit.cli``) import it: ``tests/unit/test_import_layers.py`` holds
every other part of ``bot/`` to that.
"""

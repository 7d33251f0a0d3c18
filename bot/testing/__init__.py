"""Test doubles shared by the test suite and the benchmarks (one module per double).

Shipped inside the package, as pydantic-ai ships its ``TestModel``, so that
``bench/`` and ``tests/`` import the same doubles and neither imports the other.
Nothing in the application imports this package.

- :mod:`~bot.testing.openai_server`: ``ScriptedOpenAIServer``, an OpenAI-compatible
  HTTP server answering scripted replies (``text_answer``, ``tool_call_answer``, ...).
- :mod:`~bot.testing.telegram_server`: ``FakeTelegramServer``, a fake Bot API that
  records every call and injects updates and errors.
- :mod:`~bot.testing.scripted_client`: ``ScriptedClient``, an in-process
  ``ToolCallingClient`` (``text_result``, ``tool_result``, ``echo_responder``).
- :mod:`~bot.testing.redis_server`: ``RedisServer``, a private ``redis-server`` on a
  free port that can be stopped and restarted.
- :mod:`~bot.testing.memory_session_store`: ``InMemorySessionStore``, the session
  store contract without Redis.
- :mod:`~bot.testing.recording_audit_sink`: ``RecordingAuditSink``, the audit sink
  contract in a list.
- :mod:`~bot.testing.audit_entries`: audit entries with every field chosen by the
  test, and ``stream_entries`` to read a stream back.
- :mod:`~bot.testing.counting_shop`: ``CountingShop``, the demo shop data counting order
  lookups.
- :mod:`~bot.testing.chat_harness`: ``ChatHarness``, the production-wired chat service
  (``bot.app.build_chat_service``) over a real Redis with a given model.
- :mod:`~bot.testing.polling_bot`: ``PollingBot``, the real runner polling the fake
  Bot API as a task.
- :mod:`~bot.testing.pool_stop`: ``stop_pool``, a worker pool stopped without waiting
  out its blocking read.
- :mod:`~bot.testing.mcp_shop`: ``DemoShopMcpProcess``, the demo shop's MCP server
  (``python -m bot shop-mcp``) as a child process, and ``stdio_parameters`` for its
  ``--stdio`` form.
- :mod:`~bot.testing.mcp_server`: a shop's MCP server (the ``mcp`` SDK's low-level
  server) over streamable HTTP or stdio, recording every call in a file;
  :mod:`~bot.testing.mcp_process`: ``McpServerProcess``, it as a child process that
  can be killed and started again on its port.
- :mod:`~bot.testing.settings`: ``make_settings`` and ``stack_settings``, settings by
  their documented variable names without reading ``.env``.
"""

"""The support chat instruction: one ``<version>.txt`` body per version, never edited once shipped.

- 1.2.0: read-only tools, no invented data, short Russian answers.
- 1.3.0: 1.2.0 plus the rule for tag look-alikes in the summary. The summary
  block's tags are neutralised in the text it quotes, so only the application's
  own tags open and close it; the prompt tells the model so.
- 1.4.0: 1.3.0 plus answers grounded in the shop's help center. Policy and
  how-to questions are answered from ``search_help_center`` results, naming the
  article (and its URL); when no article answers, the bot says so and offers a
  person instead of guessing. Live data (an order's status, support hours, the
  catalogue) still comes from the four data tools.
- 1.5.0: 1.4.0 plus actions the customer confirms with a button. The model may
  propose a cancellation, a return or an address change through the write tools,
  one at a time; it never claims an action happened before the outcome is in the
  history, and after proposing it asks the customer to press the button (a typed
  «да» executes nothing).
- 1.6.0: 1.5.0 for a shop's own tools (``MCP_SERVERS``): no tool is named; the
  model picks tools by the descriptions the shop gave, never asks for what the
  application binds (who the customer is) and offers ``/link`` when a tool says
  the account must be linked; the grounding, action and outcome rules are 1.5.0's.
  Not the default (the demo's tools are named in 1.5.0): a shop that connects its
  own tools sets ``PROMPT_SUPPORT_CHAT_VERSION=1.6.0``.
- 1.7.0: 1.5.0 in the customer's language (the default): the model answers in
  ``${language}``, the conversation's language named per turn, and retells tool
  results and help-center articles written in another language in its own words,
  never quoting them.
- 1.8.0: the same change made to 1.6.0 (a shop's own tools, ``MCP_SERVERS``).
"""

"""Actions the bot takes for the customer after a confirmation button (issue 23).

- :mod:`bot.sessions.pending`: the pending action kept in the session, and its card;
- :mod:`bot.engine.proposals`: a write tool's call turned into a proposal in the tool loop;
- :mod:`bot.actions.presses`: a press on the card resolved against the session.
"""

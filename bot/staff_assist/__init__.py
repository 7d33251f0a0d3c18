"""Staff assist: suggested replies in the staff topic, and quality reviews.

While a person is in charge, each customer message relayed into the topic is
followed by a suggested reply drafted by the model with the shop's read tools
(:mod:`bot.staff_assist.drafting`), posted with a "send as is" button and, when
the answer needs a write, a button that sends the customer the usual
confirmation card (:mod:`bot.staff_assist.service`). Drafting is its own job in
the customer's queue, queued after the relay (the relay never waits for it).
Every use of the tool path goes through :mod:`bot.staff_assist.tool_path`.
"""

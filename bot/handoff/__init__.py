"""Human handoff: support staff take a conversation over in a forum topic, and give it back.

State per conversation lives in its session (``bot`` | ``waiting`` | ``human``);
the topic of each customer, its reverse mapping and the recent failed turns
live under the customer's hash tag (:mod:`bot.handoff.topics`). Handlers
never talk to the staff chat: they commit :class:`StaffAction` values with
the job's outbox entry, and the worker performs them after the commit
(:mod:`bot.telegram.staff_desk`), so relays keep the chat queue's order and survive
a crash like any reply.
"""

"""Durable, ordered turns: intake, per-chat FIFO queues, workers with heartbeat leases, outbox.

One message's way (see docs/durability.md):

1. intake (:mod:`bot.queue.admission`): one idempotent script per update under the
   chat's hash tag (de-duplication, flood control, enqueue), then a signal on the
   work stream. Only then is Telegram told the update arrived.
2. a worker (:mod:`bot.queue.worker`) reads the signal through a consumer group,
   takes the chat's short lease (:mod:`bot.queue.chat_queue`), renews it by
   heartbeat, and drains the chat's queue in order.
3. each job commits atomically (session, pop, reply marked "to deliver" in the
   outbox), then the reply is delivered and the outbox entry removed.
"""

"""Every Redis Lua script of the project, each a typed call with its KEYS and ARGV named.

A script is a frozen dataclass (:class:`~bot.storage.scripts.base.LuaScript`):
its fields name what it is called with, those typed ``Key`` and ``Argv[...]``
being its KEYS and ARGV in the order the Lua text reads them (a conversation's
script builds its KEYS from its :class:`~bot.storage.keys.ConversationKeys` in
``keys()``), and :class:`~bot.storage.scripts.base.Scripts` runs it (loaded once
per client, then by its SHA). Nothing else in the project registers or evaluates
a script.

The families, one module each:

* :mod:`~bot.storage.scripts.chat`: one conversation as the worker and the
  session store see it (lease, head job, session, outbox, attempts);
* :mod:`~bot.storage.scripts.admission_lua`: accepting an update into its chat's
  queue, and a staff member's flood bucket;
* :mod:`~bot.storage.scripts.work`: the work stream's signals and their index;
* :mod:`~bot.storage.scripts.handoff`: failed turns and the idle clock of open handoffs;
* :mod:`~bot.storage.scripts.dead_letters`: jobs given up;
* :mod:`~bot.storage.scripts.audit`: a turn's audit entries and their index, once;
* :mod:`~bot.storage.scripts.csat`: the satisfaction question's schedule, asking, answer;
* :mod:`~bot.storage.scripts.shop`: the demo shop's writes.

Rules every script keeps
------------------------

**One slot.** Every key a script is given shares one hash tag (the
conversation's ``{<conv>}``, the staff chat's, the stream's...), built by
:mod:`bot.storage.keys`, so it runs on a Redis Cluster (tests/unit/test_redis_scripts.py).

**Safe to run twice.** A command retried after a timeout may have run: each
script, run again with the same arguments, leaves the same state and answers
as the first run did, or answers "done before" (a mark, a receipt, the
outbox entry, the version already written).

**The lease.** ``{<conv>}:lease`` holds the token of whoever runs the chat.
It is taken with ``SET NX PX`` (``take`` by a worker, ``acquire`` by the
console and the action press), renewed only while it holds our token
(``renew``), and deleted only by its holder (``release``, ``commit`` with
release, ``delivered`` once the queue is empty, ``move_aside``). A worker's
lease is ``SESSION_LEASE_SECONDS`` long and renewed by a heartbeat every third
of it; the console has no heartbeat, so it takes the lease for the longest
turn it can run (``bot.app.turn_lease_seconds``). One key, two lengths: the
console would need a heartbeat (or the workers a lease of minutes, and a
crashed worker's chat would wait that long) to make them one.

**The version.** The session hash keeps ``v`` (a counter) and ``d`` (the
JSON). ``commit`` writes only over the version the turn loaded; a lost lease
never overwrites a newer session, and a repeated commit finds its own
version and data and answers "saved before".

**The outbox.** A worker's turn pops its job from the head of the queue and
puts its reply in ``{<conv>}:outbox`` under the job id, in the same script
(``commit`` with a completion, or ``complete``). An outbox entry means
"answered, maybe not yet delivered": both scripts answer "done before" when it
is there; ``delivered`` drops it once the reply is sent, and hands the lease
back only when the queue and the outbox are empty, so a job queued meanwhile
is never stranded.

**Attempts.** Each lease handed a head job counts one attempt of it, once per
lease token, in ``{<conv>}:attempts``; a hand-back at shutdown
(``release`` with the unrun job) takes its attempt back.
"""

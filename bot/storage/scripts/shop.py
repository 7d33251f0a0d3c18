"""The demo shop's write: compare the order with what was read, store it and the receipt, once.

The rules every script keeps are stated in :mod:`bot.storage.scripts`.
"""

from dataclasses import dataclass

from bot.storage.scripts.base import Argv, Key, LuaScript


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyShopWrite(LuaScript):
    """Store the changed order and its receipt under the idempotency key.

    Returns ``{1, receipt}`` applied now or before (a repeat answers the first
    receipt), ``{0, ''}`` when the order changed since it was read.
    """

    SOURCE = """
local done = redis.call('GET', KEYS[2])
if done then return {1, done} end
local current = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if current ~= ARGV[2] then return {0, ''} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('SET', KEYS[2], ARGV[4], 'EX', ARGV[5])
return {1, ARGV[4]}
"""

    # The customer's orders and this write's receipt (one customer's slot).
    orders: Key
    receipt_key: Key
    order_id: Argv[str]
    # The order as read ('' : not stored yet, the seed).
    read: Argv[str]
    new_order: Argv[str]
    receipt: Argv[str]
    ttl: Argv[int]

-- Acquire a concurrency lease in every set, or in none (accounts C1, C4).
-- KEYS: the account's lease set, then (when the key has its own cap) the key's. Members are
-- stream ids scored by their expiry time.
-- ARGV: member, ttl_ms, then one limit per lease set.
-- Returns 0 when acquired, else the position (1: the account's, 2: the key's) of the first
-- set that is full.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
for i = 1, #KEYS do
  local key = KEYS[i]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local count = redis.call('ZCARD', key)
  if redis.call('ZSCORE', key, ARGV[1]) then
    count = count - 1
  end
  if count >= tonumber(ARGV[2 + i]) then
    return i
  end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[1])
  if redis.call('PTTL', KEYS[i]) < ttl then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return 0

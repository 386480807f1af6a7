-- Set an existing mirror to the database value (accounts Q11), only while the account holds
-- no live lease and no lease was acquired since the caller read the generation.
-- KEYS: the mirror, the account's lease set, the account's generation.
-- ARGV: used, generation. Returns 1 when set.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) > 0 then
  return 0
end
if tonumber(redis.call('GET', KEYS[3]) or '0') ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
return 1

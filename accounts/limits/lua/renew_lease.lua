-- Renew a lease with ZADD XX (accounts C2). A lease missing or expired in any of its sets is
-- lost: it is removed everywhere and 0 is returned.
-- KEYS: the lease sets it was acquired in. ARGV: member, ttl_ms.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
for _, key in ipairs(KEYS) do
  local score = redis.call('ZSCORE', key, ARGV[1])
  if not score or tonumber(score) <= now then
    for _, k in ipairs(KEYS) do
      redis.call('ZREM', k, ARGV[1])
    end
    return 0
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', now + ttl, ARGV[1])
  if redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
end
return 1

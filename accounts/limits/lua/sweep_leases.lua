-- Drop expired leases (accounts C4); Redis deletes a set once it is empty.
-- KEYS: lease sets. Returns how many leases were dropped.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local removed = 0
for _, key in ipairs(KEYS) do
  removed = removed + redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
end
return removed

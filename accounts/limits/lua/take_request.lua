-- Take one request token from every sliding log, or from none (accounts R1-R4).
-- KEYS: the account's log, then (when the key has its own cap) the key's log.
-- ARGV: member, window_ms, then one limit per log.
-- Returns {1, 0} when taken, {0, retry_after_ms} when refused.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
local retry = 0
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local limit = tonumber(ARGV[2 + i])
  local count = redis.call('ZCARD', key)
  if count >= limit then
    -- The entry whose expiry brings the count below the limit.
    local entry = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    local wait = tonumber(entry[2]) + window - now
    if wait < 1 then wait = 1 end
    if wait > retry then retry = wait end
  end
end
if retry > 0 then
  return {0, retry}
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[1])
  redis.call('PEXPIRE', key, window)
end
return {1, 0}

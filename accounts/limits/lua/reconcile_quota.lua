-- Set an existing mirror to the database value plus the live reservations (accounts Q11).
-- A reservation is live while its holder's lease is; the others are dropped (the stream ended
-- or died: what it metered is in the database). Nothing is set when a settlement moved quota
-- from a reservation into the database since the caller read the generation.
-- KEYS: the mirror, the reservations hash, the account's lease set, the account's generation.
-- ARGV: used, generation. Returns -1 (no mirror), 0 (changed meanwhile) or 1 (set).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if tonumber(redis.call('GET', KEYS[4]) or '0') ~= tonumber(ARGV[2]) then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local held = 0
local entries = redis.call('HGETALL', KEYS[2])
for i = 1, #entries, 2 do
  local member = string.match(entries[i], '^([^|]*)')
  if redis.call('ZSCORE', KEYS[3], member) then
    held = held + tonumber(entries[i + 1])
  else
    redis.call('HDEL', KEYS[2], entries[i])
  end
end
redis.call('SET', KEYS[1], tonumber(ARGV[1]) + held, 'KEEPTTL')
return 1

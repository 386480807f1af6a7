-- Reserve quota in a seeded mirror (accounts Q5-Q8). The mirror is never created here.
-- KEYS[1]: the mirror; KEYS[2] (optional): the account's reservations of the metric and
-- period, a hash of what each holder ("<lease member>|<record id>") reserved and has not yet
-- accounted in the database (Q11).
-- ARGV: amount, limit (-1: no limit), partial (1: grant what fits), holder, ttl_ms.
-- Returns {-1, 0} when the mirror is not seeded, else {granted, remaining}
-- (remaining -1: no limit).
local used = redis.call('GET', KEYS[1])
if not used then
  return {-1, 0}
end
used = tonumber(used)
local amount = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local grant = amount
local remaining = -1
if limit >= 0 then
  remaining = math.max(limit - used, 0)
  if ARGV[3] == '1' then
    grant = math.min(amount, remaining)
  elseif amount > remaining then
    grant = 0
  end
  remaining = remaining - grant
end
if grant > 0 then
  redis.call('INCRBY', KEYS[1], grant)
  if KEYS[2] then
    redis.call('HINCRBY', KEYS[2], ARGV[4], grant)
    redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[5]))
  end
end
return {grant, remaining}

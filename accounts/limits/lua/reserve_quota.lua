-- Reserve quota in a seeded mirror (accounts Q5-Q8). The mirror is never created here.
-- KEYS[1]: the mirror. ARGV: amount, limit (-1: no limit), partial (1: grant what fits).
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
end
return {grant, remaining}

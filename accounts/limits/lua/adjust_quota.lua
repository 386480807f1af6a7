-- Adjust a seeded mirror by a delta (accounts Q9); a missing mirror stays missing (Q5).
-- KEYS[1]: the mirror. ARGV: delta. Returns 1 when adjusted.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('INCRBY', KEYS[1], ARGV[1])
return 1

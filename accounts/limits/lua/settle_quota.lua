-- Settle a holder's reservation after its database write (accounts Q9, Q11): the mirror moves
-- by delta (metered - reserved, at finalization), the holder's entry becomes what it still
-- holds and is not in the database (0 removes it), and the generation counts the change.
-- KEYS: the mirror, the reservations hash, the account's generation.
-- ARGV: holder, outstanding, delta, generation_ttl_ms. Returns 1.
if redis.call('EXISTS', KEYS[1]) == 1 and tonumber(ARGV[3]) ~= 0 then
  redis.call('INCRBY', KEYS[1], ARGV[3])
end
if tonumber(ARGV[2]) > 0 then
  if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
    redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  end
else
  redis.call('HDEL', KEYS[2], ARGV[1])
end
redis.call('INCR', KEYS[3])
redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[4]))
return 1

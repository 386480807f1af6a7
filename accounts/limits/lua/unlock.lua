-- Release a lock only if the caller's token still holds it (accounts G7).
-- KEYS[1]: the lock. ARGV: token. Returns 1 when released.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

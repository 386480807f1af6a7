-- Store a key's version unless a higher one is there (accounts A5, K6): on-commit writes
-- that arrive out of order never move it back. Serves as the SET NX seed too.
-- KEYS[1]: the version key. ARGV: version, ttl_ms. Returns the stored version.
local current = tonumber(redis.call('GET', KEYS[1]))
local version = tonumber(ARGV[1])
if current and current >= version then
  return current
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return version

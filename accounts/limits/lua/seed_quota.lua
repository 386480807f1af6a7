-- Seed a mirror from the database with SET NX (accounts Q5); return the mirror's value.
-- KEYS[1]: the mirror. ARGV: used, ttl_ms.
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
return tonumber(redis.call('GET', KEYS[1]))

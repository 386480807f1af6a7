-- Release a lease (accounts C3); releasing twice is harmless.
-- KEYS: the lease sets it was acquired in. ARGV: member.
for _, key in ipairs(KEYS) do
  redis.call('ZREM', key, ARGV[1])
end
return 1

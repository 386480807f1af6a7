-- Give one request token back (accounts R5).
-- KEYS: the logs it was taken from. ARGV: member.
for _, key in ipairs(KEYS) do
  redis.call('ZREM', key, ARGV[1])
end
return 1

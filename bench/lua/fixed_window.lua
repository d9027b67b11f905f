-- Fixed window counter (twin of RL.PERIOD without ALIGN).
-- Idiom: the INCR + EXPIRE rate-limiter pattern from the Redis INCR documentation, made
-- atomic as a script (go-zero's PeriodLimit script has the same shape): the first request of a
-- window creates the counter and sets its TTL; like those scripts it counts limited requests
-- too. PTTL is read only to fill the same five reply fields the module returns.
-- KEYS[1] counter   ARGV: limit, window (ms), cost
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1')

local used = redis.call('INCRBY', key, cost)
if used == cost then
  redis.call('PEXPIRE', key, window)
end
local ttl = redis.call('PTTL', key)
if used <= limit then
  return {1, limit, limit - used, 0, ttl}
end
return {0, limit, 0, ttl, ttl}

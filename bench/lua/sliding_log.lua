-- Sliding window log (twin of exact RL.SLIDE).
-- Idiom: the sorted-set log (Redisson's RRateLimiter and many blog posts): drop the entries
-- that left the window with ZREMRANGEBYSCORE, count the rest with ZCARD, ZADD one member per
-- permit scored by its ms timestamp, PEXPIRE the set by the window. Members are made unique
-- from the server's TIME in microseconds (a script runs for more than 1 us).
-- KEYS[1] log   ARGV: limit, window (ms), cost
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)

redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local used = redis.call('ZCARD', key)
if used + cost <= limit then
  for i = 1, cost do
    redis.call('ZADD', key, now, t[1] .. '.' .. t[2] .. ':' .. i)
  end
  if cost > 0 then
    redis.call('PEXPIRE', key, window)
  end
  return {1, limit, limit - used - cost, 0, redis.call('PTTL', key)}
end
local retry = -1
if cost <= limit then
  -- The request fits once the (used + cost - limit)-th oldest entry has left.
  local k = used + cost - limit - 1
  local entry = redis.call('ZRANGE', key, k, k, 'WITHSCORES')
  retry = tonumber(entry[2]) + window - now
end
return {0, limit, math.max(0, limit - used), retry, redis.call('PTTL', key)}

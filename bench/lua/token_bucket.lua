-- Token bucket with lazy refill (twin of RL.TOKEN, smooth refill).
-- Idiom: the hash-based Lua bucket of countless blog posts and in-house limiters: HMGET the
-- token count and the last refill time, refill by elapsed time (floating point), HSET both
-- back and expire the hash when it would be full again (Spring Cloud Gateway's
-- request_rate_limiter.lua does the same with two string keys). Time from the server's TIME.
-- KEYS[1] bucket   ARGV: capacity, rate (tokens per period), period (ms), cost
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)

local state = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
if now > ts then
  tokens = math.min(capacity, tokens + (now - ts) * rate / period)
  ts = now
end

if tokens >= cost then
  tokens = tokens - cost
  local reset = math.ceil((capacity - tokens) * period / rate)
  if cost > 0 then
    redis.call('HSET', key, 'tokens', tokens, 'ts', ts)
    redis.call('PEXPIRE', key, math.max(1, reset))
  end
  return {1, capacity, math.floor(tokens), 0, reset}
end
local retry = -1
if cost <= capacity then
  retry = math.ceil((cost - tokens) * period / rate)
end
return {0, capacity, math.floor(tokens), retry, math.ceil((capacity - tokens) * period / rate)}

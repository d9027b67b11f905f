-- Leaky bucket as a queue (twin of RL.LEAKY in delay mode).
-- Idiom: the water level and the time it was measured in a hash, drained lazily by elapsed
-- time (lua-resty-limit-req keeps the same "excess" + "last" pair for nginx-style limit_req);
-- an admitted request waits until the water ahead of it has drained. Floating point.
-- KEYS[1] bucket   ARGV: capacity, rate (units per period), period (ms), cost
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)

local state = redis.call('HMGET', key, 'level', 'ts')
local level = tonumber(state[1]) or 0
local ts = tonumber(state[2]) or now
if now > ts then
  level = math.max(0, level - (now - ts) * rate / period)
  ts = now
end

if level + cost <= capacity then
  local delay = math.ceil(level * period / rate)
  level = level + cost
  local reset = math.ceil(level * period / rate)
  if cost > 0 then
    redis.call('HSET', key, 'level', level, 'ts', ts)
    redis.call('PEXPIRE', key, math.max(1, reset))
  end
  return {1, capacity, math.floor(capacity - level), delay, reset}
end
local retry = -1
if cost <= capacity then
  retry = math.ceil((level + cost - capacity) * period / rate)
end
return {0, capacity, math.floor(capacity - level), retry, math.ceil(level * period / rate)}

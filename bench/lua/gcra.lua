-- GCRA on a single number (twin of CL.THROTTLE, same reply layout as redis-cell).
-- Idiom: the theoretical arrival time (TAT) kept in one string key, SET with PX until it
-- passes, as in redis-gcra and the other Lua ports of throttled's GCRA; floating-point ms.
-- KEYS[1] tat   ARGV: max_burst, count, period (s), quantity
local key = KEYS[1]
local burst = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local period = tonumber(ARGV[3]) * 1000
local quantity = tonumber(ARGV[4] or '1')

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)

local emission = period / count             -- ms between two requests at the sustained rate
local tolerance = emission * (burst + 1)    -- how far ahead of now the TAT may run
local limit = burst + 1

local tat = tonumber(redis.call('GET', key)) or now
if tat < now then
  tat = now
end
local new_tat = tat + emission * quantity
local diff = now - (new_tat - tolerance)
if diff < 0 then
  local retry = -1
  if emission * quantity <= tolerance then
    retry = math.ceil(-diff / 1000)
  end
  local left = math.max(0, math.floor((now - (tat - tolerance)) / emission))
  return {1, limit, left, retry, math.ceil((tat - now) / 1000)}
end
local ttl = math.ceil(new_tat - now)
if ttl > 0 then
  redis.call('SET', key, new_tat, 'PX', ttl)
end
return {0, limit, math.floor(diff / emission), -1, math.ceil(ttl / 1000)}

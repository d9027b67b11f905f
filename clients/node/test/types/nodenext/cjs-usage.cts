// CommonJS under --module nodenext (a .cts file): the "require" side of the exports map.
import Redis = require('ioredis');
import rl = require('redis-ratelimit');
import { RedisModuleStore, RateLimiterRedisModule, type Decision } from 'redis-ratelimit';

export async function cjs(redis: Redis.default): Promise<void> {
  const d: Decision = await new rl.RateLimit(redis).period('k', { limit: 1, period: '1m' });
  new RedisModuleStore({ client: redis });
  new RateLimiterRedisModule({ storeClient: redis });
  new rl.ThrottlerStorageRedisService(redis);
  void d;
}

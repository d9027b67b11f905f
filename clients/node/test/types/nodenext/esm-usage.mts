// ESM under --module nodenext: every export by name through the package's "exports" map
// (compiled by test/types.test.js; the package resolves itself by name).
import { Redis } from 'ioredis';
import pkg, {
  RateLimit,
  rateLimit,
  ModuleNotLoadedError,
  RateLimitTimeoutError,
  keySlot,
  RateLimiterRedisModule,
  RateLimiterUnionModule,
  RateLimiterQueueModule,
  ThrottlerStorageRedisModule,
  ThrottlerStorageRedisService,
  RedisModuleStore,
  type Decision,
  type LimiterInfo,
} from 'redis-ratelimit';

export async function esm(redis: Redis): Promise<void> {
  const rl = new RateLimit(redis);
  const d: Decision = await rl.token('k', { capacity: 1, rate: 1, period: '1s' });
  const info: LimiterInfo | null = await rl.info('k');
  // info() narrows on algorithm: no casts
  if (info && info.algorithm === 'period') {
    const used: number = info.used + info.windowEndMs + info.updatedMs + info.ttlMs;
    void used;
  }
  if (info && info.algorithm === 'lease') for (const l of info.leases) void (l.id + l.expiresMs);
  const limiter = new RateLimiterRedisModule({ storeClient: redis, points: 1, duration: 1 });
  new RateLimiterUnionModule(limiter);
  new RateLimiterQueueModule(limiter);
  new ThrottlerStorageRedisModule(redis);
  new ThrottlerStorageRedisService(redis);
  new RedisModuleStore({ client: redis });
  rateLimit({ client: redis, limit: 1, period: 1000, algorithm: 'period' });
  const e: unknown = null;
  if (e instanceof ModuleNotLoadedError || e instanceof RateLimitTimeoutError) void e.code;
  void keySlot('k');
  void pkg.RateLimit;
  void d;
}

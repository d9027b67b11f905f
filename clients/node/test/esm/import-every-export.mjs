// Imported by test/esm.test.js: every export of the package by name from ESM, through the
// package's own name (its "exports" map, as an application's import resolves it).
import * as ns from 'redis-ratelimit';
import pkg, {
  RateLimit,
  PermitBlock,
  rateLimit,
  ModuleNotLoadedError,
  RateLimitTimeoutError,
  CallMayHaveCountedError,
  keySlot,
  registerRateLimitMetrics,
  RateLimiterRedisModule,
  RateLimiterUnionModule,
  RateLimiterQueueModule,
  ThrottlerStorageRedisModule,
  ThrottlerStorageRedisService,
  RedisModuleStore,
} from 'redis-ratelimit';

const named = {
  RateLimit,
  PermitBlock,
  rateLimit,
  ModuleNotLoadedError,
  RateLimitTimeoutError,
  CallMayHaveCountedError,
  keySlot,
  registerRateLimitMetrics,
  RateLimiterRedisModule,
  RateLimiterUnionModule,
  RateLimiterQueueModule,
  ThrottlerStorageRedisModule,
  ThrottlerStorageRedisService,
  RedisModuleStore,
};
process.stdout.write(
  JSON.stringify({
    named: Object.fromEntries(Object.entries(named).map(([k, v]) => [k, typeof v])),
    namespace: Object.keys(ns).filter((k) => k !== 'default').sort(),
    sameAsRequire: Object.entries(named).every(([k, v]) => v === pkg[k]),
  }),
);

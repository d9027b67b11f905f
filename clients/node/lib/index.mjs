// redis-ratelimit from ESM: every export of the CommonJS package by name (the same objects, so
// `instanceof` holds across both), and the whole of it as the default export.
import pkg from './index.js';

export const {
  RateLimit,
  PermitBlock,
  rateLimit,
  ModuleNotLoadedError,
  RateLimitTimeoutError,
  keySlot,
  registerRateLimitMetrics,
  RateLimiterRedisModule,
  RateLimiterUnionModule,
  RateLimiterQueueModule,
  ThrottlerStorageRedisModule,
  ThrottlerStorageRedisService,
  RedisModuleStore,
} = pkg;

export default pkg;

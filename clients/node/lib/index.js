'use strict';
/**
 * redis-ratelimit: the module's commands from Node. The client and the middleware load with the
 * package; each drop-in backend loads its host library (a peer dependency) when first used.
 */
const { RateLimit } = require('./client');
const { rateLimit } = require('./middleware');
const { ModuleNotLoadedError } = require('./errors');
const { keySlot } = require('./slot');

module.exports = { RateLimit, rateLimit, ModuleNotLoadedError, keySlot };

const lazy = {
  RateLimiterRedisModule: () => require('./rate-limiter-flexible').RateLimiterRedisModule,
  RateLimiterUnionModule: () => require('./rate-limiter-flexible').RateLimiterUnionModule,
  RateLimiterQueueModule: () => require('./rate-limiter-flexible').RateLimiterQueueModule,
  ThrottlerStorageRedisModule: () => require('./nestjs-throttler').ThrottlerStorageRedisModule,
  ThrottlerStorageRedisService: () => require('./nestjs-throttler').ThrottlerStorageRedisService,
  RedisModuleStore: () => require('./express-rate-limit').RedisModuleStore,
};
for (const [name, load] of Object.entries(lazy)) {
  Object.defineProperty(module.exports, name, { enumerable: true, get: load });
}

'use strict';
/**
 * redis-ratelimit: the module's commands from Node. The client and the middleware load with the
 * package; each drop-in backend loads its host library (a peer dependency) when first used.
 *
 * Every export is a property of module.exports, and every name is visible to Node's static
 * detection of CommonJS exports (the line at the end), so `import { RedisModuleStore } from
 * 'redis-ratelimit'` works through index.mjs and through this file alike.
 */
const { RateLimit } = require('./client');
const { rateLimit } = require('./middleware');
const { ModuleNotLoadedError, RateLimitTimeoutError, CallMayHaveCountedError } = require('./errors');
const { keySlot } = require('./slot');
const { peerClass } = require('./peer');
const { registerRateLimitMetrics } = require('./prometheus');
const { PermitBlock } = require('./permit-block');

module.exports = { RateLimit, PermitBlock, rateLimit, ModuleNotLoadedError, RateLimitTimeoutError, CallMayHaveCountedError, keySlot, registerRateLimitMetrics };

/**
 * The drop-in backends, loaded on first access. A backend whose host library cannot be found is
 * still exported (so `import { … }` of every name works whatever is installed): a class whose
 * constructor throws the install advice.
 */
const lazy = {
  RateLimiterRedisModule: () => peerClass('rate-limiter-flexible', 'RateLimiterRedisModule', () => require('./rate-limiter-flexible').RateLimiterRedisModule),
  RateLimiterUnionModule: () => peerClass('rate-limiter-flexible', 'RateLimiterUnionModule', () => require('./rate-limiter-flexible').RateLimiterUnionModule),
  RateLimiterQueueModule: () => peerClass('rate-limiter-flexible', 'RateLimiterQueueModule', () => require('./rate-limiter-flexible').RateLimiterQueueModule),
  ThrottlerStorageRedisModule: () => require('./nestjs-throttler').ThrottlerStorageRedisModule,
  ThrottlerStorageRedisService: () => require('./nestjs-throttler').ThrottlerStorageRedisService,
  RedisModuleStore: () => require('./express-rate-limit').RedisModuleStore,
};
for (const [name, load] of Object.entries(lazy)) {
  let value;
  Object.defineProperty(module.exports, name, {
    enumerable: true,
    get: () => (value === undefined ? (value = load()) : value),
  });
}

// Node's ESM loader learns a CommonJS file's export names by reading its source (cjs-module-lexer),
// which cannot see the getters above: this never-run assignment names them (the idiom bundlers
// emit for the same purpose). At import, each name's value is read through its getter.
0 && (module.exports = { RateLimiterRedisModule, RateLimiterUnionModule, RateLimiterQueueModule, ThrottlerStorageRedisModule, ThrottlerStorageRedisService, RedisModuleStore });

// RLF_IMPL shim: rate-limiter-flexible's tests require('../lib/RateLimiterRedis') and get the class
// itself; this hands them RateLimiterRedisModule from the redis-ratelimit package installed in the
// suite's project (its node_modules), as a user's project would have it.
'use strict';
const path = require('path');
module.exports = require(path.join(process.cwd(), 'node_modules', 'redis-ratelimit')).RateLimiterRedisModule;

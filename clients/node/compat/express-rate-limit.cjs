// RATE_LIMIT_REDIS_IMPL shim: express-rate-limit's store test does `import RedisStore from
// 'rate-limit-redis'` and `new RedisStore({ sendCommand })`; module.exports is the class itself
// (RedisModuleStore from the redis-ratelimit package installed in the suite's project).
'use strict';
const path = require('path');
module.exports = require(path.join(process.cwd(), 'node_modules', 'redis-ratelimit')).RedisModuleStore;

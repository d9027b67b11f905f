// THROTTLER_STORAGE_IMPL shim: the nest-lab fixtures import { ThrottlerStorageRedisService } from
// '../../../src'; this is the redis-ratelimit package installed in the suite's project, whose
// ThrottlerStorageRedisService is ThrottlerStorageRedisModule.
'use strict';
const path = require('path');
module.exports = require(path.join(process.cwd(), 'node_modules', 'redis-ratelimit'));

'use strict';
// The six limiters of the benchmark, as Express middleware: the same limit for each (1000
// requests per 60 s fixed window per key, the key in ?k=). Used by app.js (one per process)
// and by bench.js (in-process, for the limiter's own CPU per decision).
const Redis = require('ioredis');
const { createClient } = require('redis');

const LIMIT = 1000;
const WINDOW_S = 60;

// rate-limiter-flexible has no middleware of its own: the usual few lines, with the same IETF
// headers as the other limiters write.
function rlfMiddleware(limiter) {
  const policy = `"default";q=${LIMIT};w=${WINDOW_S}`;
  return (req, res, next) => {
    limiter.consume(req.query.k).then(
      (r) => {
        res.setHeader('RateLimit-Policy', policy);
        res.setHeader('RateLimit', `"default";r=${r.remainingPoints};t=${Math.ceil(r.msBeforeNext / 1000)}`);
        next();
      },
      (r) => {
        if (r instanceof Error) return next(r);
        res.setHeader('Retry-After', String(Math.ceil(r.msBeforeNext / 1000)));
        res.status(429).send('Too Many Requests');
      },
    );
  };
}

async function limiterFor(name, redisPort) {
  const ioredis = () => new Redis({ port: Number(redisPort) });
  const nodeRedis = async () => {
    const c = createClient({ socket: { port: Number(redisPort), host: '127.0.0.1' } });
    await c.connect();
    return c;
  };
  const erlOptions = { windowMs: WINDOW_S * 1000, limit: LIMIT, standardHeaders: 'draft-8', legacyHeaders: false, keyGenerator: (req) => req.query.k, validate: false };
  switch (name) {
    case 'rlf-stock': {
      const { RateLimiterRedis } = require('rate-limiter-flexible');
      return rlfMiddleware(new RateLimiterRedis({ storeClient: ioredis(), points: LIMIT, duration: WINDOW_S }));
    }
    case 'erl-rate-limit-redis': {
      const { rateLimit } = require('express-rate-limit');
      const { RedisStore } = require('rate-limit-redis');
      const c = await nodeRedis();
      return rateLimit({ ...erlOptions, store: new RedisStore({ sendCommand: (...args) => c.sendCommand(args) }) });
    }
    case 'rlf-module': {
      const { RateLimiterRedisModule } = require('..');
      return rlfMiddleware(new RateLimiterRedisModule({ storeClient: ioredis(), points: LIMIT, duration: WINDOW_S }));
    }
    case 'rlf-module-node-redis': {
      const { RateLimiterRedisModule } = require('..');
      return rlfMiddleware(new RateLimiterRedisModule({ storeClient: await nodeRedis(), useRedisPackage: true, points: LIMIT, duration: WINDOW_S }));
    }
    case 'erl-module-store': {
      const { rateLimit } = require('express-rate-limit');
      const { RedisModuleStore } = require('..');
      const c = await nodeRedis();
      return rateLimit({ ...erlOptions, store: new RedisModuleStore({ sendCommand: (...args) => c.sendCommand(args) }) });
    }
    case 'middleware': {
      // node-redis: the lighter of the two clients per call (see the in-process column of (a) and (b))
      const { rateLimit } = require('..');
      return rateLimit({ client: await nodeRedis(), algorithm: 'period', limit: LIMIT, period: `${WINDOW_S}s`, key: (req) => req.query.k });
    }
    default:
      throw new Error(`unknown variant ${name}`);
  }
}

module.exports = { limiterFor, LIMIT, WINDOW_S };

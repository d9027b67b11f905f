'use strict';
// The Express/Connect middleware on Express 4 and 5: IETF RateLimit headers on every reply,
// 429 with Retry-After when refused, custom key and cost, errors.
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const Redis = require('ioredis');
const { rateLimit, RateLimit } = require('..');
const { startServer } = require('../testing/servers');

let server;
let redis;
before(async () => {
  server = await startServer();
  redis = new Redis({ port: server.port });
});
after(async () => {
  redis.disconnect();
  await server.stop();
});

async function serve(app, fn) {
  const srv = http.createServer(app);
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${srv.address().port}`;
    await fn((path = '/', headers = {}) => fetch(url + path, { headers }));
  } finally {
    srv.closeAllConnections();
    await new Promise((r) => srv.close(r));
  }
}

for (const [name, express] of [['Express 4', require('express4')], ['Express 5', require('express')]]) {
  describe(name, () => {
    test('headers on every reply; 429 with Retry-After when refused', async () => {
      const app = express();
      app.use(rateLimit({ client: redis, algorithm: 'period', limit: 2, period: '1m', prefix: `${name}:a:` }));
      app.get('/', (_req, res) => res.send('ok'));
      await serve(app, async (get) => {
        const first = await get();
        assert.equal(first.status, 200);
        assert.equal(first.headers.get('ratelimit-policy'), '"default";q=2;w=60');
        // t and Retry-After are whole seconds rounded up: 60 at the window's start, 59 once a second has passed
        assert.match(first.headers.get('ratelimit'), /^"default";r=1;t=(59|60)$/);
        assert.equal(first.headers.get('retry-after'), null);
        assert.match((await get()).headers.get('ratelimit'), /^"default";r=0;t=(59|60)$/);
        const refused = await get();
        assert.equal(refused.status, 429);
        assert.match(refused.headers.get('retry-after'), /^(59|60)$/);
        assert.match(refused.headers.get('ratelimit'), /^"default";r=0;t=(59|60)$/);
        assert.deepEqual(Object.keys(await refused.json()), ['error', 'retryAfterMs']);
      });
    });

    test('token bucket by API key with a cost per request; a handler; skip', async () => {
      const app = express();
      app.use(
        rateLimit({
          client: new RateLimit(redis),
          capacity: 10,
          rate: 10,
          period: '10s',
          policy: 'api',
          prefix: `${name}:b:`,
          key: (req) => req.headers['x-api-key'] || 'anon',
          cost: (req) => Number(req.query.n || 1),
          skip: (req) => req.path === '/health',
          handler: (_req, res, _next, d) => res.status(503).json({ wait: d.retryAfterMs }),
        }),
      );
      app.get('/', (req, res) => res.json(req.rateLimit));
      app.get('/health', (_req, res) => res.send('up'));
      await serve(app, async (get) => {
        const a = await get('/?n=7', { 'x-api-key': 'k1' });
        assert.equal(a.headers.get('ratelimit-policy'), '"api";q=10;w=10');
        assert.equal((await a.json()).remaining, 3);
        const b = await get('/?n=7', { 'x-api-key': 'k1' });
        assert.equal(b.status, 503);
        assert.equal(b.headers.get('retry-after'), '4'); // 4 tokens short at 1 per second
        assert.equal((await get('/?n=7', { 'x-api-key': 'k2' })).status, 200); // another key
        const h = await get('/health');
        assert.equal(h.headers.get('ratelimit'), null);
      });
    });

    test('a Redis error goes to next(err), or lets the request through with failOpen', async () => {
      const broken = async () => {
        throw Object.assign(new Error('ERR boom'), { code: 'ERR' });
      };
      for (const failOpen of [false, true]) {
        const app = express();
        app.use(rateLimit({ client: broken, capacity: 1, rate: 1, period: 1000, failOpen }));
        app.get('/', (_req, res) => res.send('ok'));
        app.use((err, _req, res, _next) => res.status(500).send(err.message));
        await serve(app, async (get) => {
          const r = await get();
          assert.equal(r.status, failOpen ? 200 : 500);
          if (!failOpen) assert.equal(await r.text(), 'ERR boom');
        });
      }
    });
  });
}

test('ban: the request past the limit locks the key out', async () => {
  const express = require('express');
  const app = express();
  app.use(rateLimit({ client: redis, algorithm: 'slide', limit: 1, window: '1s', ban: '1h', prefix: 'ban:' }));
  app.get('/', (_req, res) => res.send('ok'));
  await serve(app, async (get) => {
    assert.equal((await get()).status, 200);
    const banned = await get();
    assert.equal(banned.status, 429);
    assert.equal(banned.headers.get('retry-after'), '3600');
  });
});

test('leaky bucket in delay mode: admitted requests are spread out, not refused', async () => {
  const express = require('express');
  const app = express();
  app.use(rateLimit({ client: redis, algorithm: 'leaky', capacity: 5, rate: 1, period: 300, prefix: 'leaky:' }));
  app.get('/', (_req, res) => res.send(String(Date.now())));
  await serve(app, async (get) => {
    const t0 = Date.now();
    const replies = await Promise.all([get(), get(), get()]);
    assert.deepEqual(replies.map((r) => r.status), [200, 200, 200]);
    const served = (await Promise.all(replies.map((r) => r.text()))).map(Number).sort((a, b) => a - b);
    assert.ok(served[2] - t0 >= 550, `the third served after ${served[2] - t0} ms, not before two drain steps (600 ms)`);
  });
});

test('bad options fail at setup', () => {
  assert.throws(() => rateLimit({ client: redis, algorithm: 'period', period: '1m' }), /limit is required/);
  assert.throws(() => rateLimit({ capacity: 1, rate: 1, period: 1 }), /needs a client/);
  assert.throws(() => rateLimit({ client: redis, algorithm: 'slide', limit: 5, window: 'soon' }), TypeError);
});

test('plain Node / Connect: (req, res, next) without Express', async () => {
  const mw = rateLimit({ client: redis, algorithm: 'slide', limit: 1, window: '1m', prefix: 'connect:' });
  const app = (req, res) => mw(req, res, (err) => res.end(err ? 'error' : 'ok'));
  await serve(app, async (get) => {
    const ok = await get();
    assert.deepEqual([ok.status, await ok.text(), ok.headers.get('ratelimit-policy')], [200, 'ok', '"default";q=1;w=60']);
    const refused = await get();
    assert.equal(refused.status, 429);
    assert.match(refused.headers.get('retry-after'), /^(59|60)$/);
  });
});

'use strict';
// Regression suite "middleware defaults" (issue 23): what the Express middleware does with
// nothing configured. Two middlewares count separately (different algorithms: no WRONGTYPE;
// the same limit on two routes: two counters), and the namespace is the same in every process
// of the app; a key() answering nothing falls back to the client address instead of one shared
// bucket; the default key groups IPv6 by /56 and reads IPv4-mapped addresses as IPv4; with
// Redis stopped or hung (SIGSTOP) a request is answered within the middleware's timeout, both
// fail-open and fail-closed, through ioredis with its offline queue (the README's new Redis()).
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const Redis = require('ioredis');
const { rateLimit, RateLimitTimeoutError } = require('..');
const { startServer, useServer } = require('../testing/servers');

const ctx = useServer({ before, after });

/** Runs one request with address `ip` through middleware `mw`: {status, decision, error, ms}. */
function hit(mw, ip = '192.0.2.1', extra = {}) {
  const started = Date.now();
  return new Promise((resolve) => {
    const req = { ip, headers: {}, socket: { remoteAddress: ip }, ...extra };
    const res = {
      statusCode: 200,
      headers: {},
      setHeader(k, v) {
        this.headers[k.toLowerCase()] = v;
      },
      end() {
        resolve({ status: this.statusCode, decision: req.rateLimit, ms: Date.now() - started });
      },
    };
    mw(req, res, (err) => resolve({ status: err ? 500 : 200, decision: req.rateLimit, error: err, ms: Date.now() - started }));
  });
}

describe('two middlewares count separately with nothing configured', () => {
  test('different algorithms: no WRONGTYPE, each its own counter', async () => {
    const a = rateLimit({ client: ctx.redis, algorithm: 'period', limit: 2, period: '1m' });
    const b = rateLimit({ client: ctx.redis, algorithm: 'token', capacity: 5, rate: 1, period: '1s' });
    const first = await hit(a, '192.0.2.10');
    const second = await hit(b, '192.0.2.10');
    assert.deepEqual([first.status, second.status], [200, 200], String(second.error));
    assert.deepEqual([first.decision.remaining, second.decision.remaining], [1, 4]);
  });

  test('two middlewares with different parameters of one algorithm: two counters', async () => {
    const a = rateLimit({ client: ctx.redis, algorithm: 'slide', limit: 1, window: '1m' });
    const b = rateLimit({ client: ctx.redis, algorithm: 'slide', limit: 2, window: '1m' });
    assert.equal((await hit(a, '192.0.2.11')).status, 200);
    assert.equal((await hit(a, '192.0.2.11')).status, 429);
    assert.deepEqual([(await hit(b, '192.0.2.11')).decision.remaining], [1], 'b has its own counter');
  });

  test('the same limit twice: one namespace, said once as a process warning; a prefix each separates them', async () => {
    const warnings = [];
    const onWarning = (w) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const opts = { client: ctx.redis, algorithm: 'slide', limit: 1, window: '10m' };
      const a = rateLimit(opts);
      const b = rateLimit(opts);
      rateLimit(opts);
      await new Promise((r) => setImmediate(r));
      assert.equal(warnings.filter((w) => w.code === 'RL_SHARED_NAMESPACE').length, 1);
      assert.equal((await hit(a, '192.0.2.14')).status, 200);
      assert.equal((await hit(b, '192.0.2.14')).status, 429, 'a middleware made again (per request, say) still limits');
      const routeA = rateLimit({ ...opts, prefix: 'route-a:' });
      const routeB = rateLimit({ ...opts, prefix: 'route-b:' });
      assert.equal((await hit(routeA, '192.0.2.14')).status, 200);
      assert.equal((await hit(routeB, '192.0.2.14')).status, 200);
    } finally {
      process.off('warning', onWarning);
    }
  });

  test('the default namespace is the same in every process of the app', async () => {
    // another process builds the same middleware and takes one permit for the address
    const script = `
      const Redis = require('ioredis');
      const { rateLimit } = require('redis-ratelimit');
      const redis = new Redis({ port: ${ctx.server.port} });
      const mw = rateLimit({ client: redis, algorithm: 'period', limit: 5, period: '1h' });
      const req = { ip: '192.0.2.12', headers: {} };
      mw(req, { setHeader() {}, end() {} }, (err) => { console.log(err ? 'error ' + err.message : req.rateLimit.remaining); redis.disconnect(); });`;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', cwd: path.join(__dirname, '..') });
    assert.equal(r.stdout.trim(), '4', r.stderr);
    const here = rateLimit({ client: ctx.redis, algorithm: 'period', limit: 5, period: '1h' });
    assert.equal((await hit(here, '192.0.2.12')).decision.remaining, 3, 'this process counts on the same key');
  });

  test('an explicit prefix names the namespace (two middlewares may then share it)', async () => {
    const a = rateLimit({ client: ctx.redis, algorithm: 'period', limit: 3, period: '1m', prefix: 'shared:' });
    const b = rateLimit({ client: ctx.redis, algorithm: 'period', limit: 3, period: '1m', prefix: 'shared:' });
    await hit(a, '192.0.2.13');
    assert.equal((await hit(b, '192.0.2.13')).decision.remaining, 1);
    assert.equal(await ctx.redis.exists('shared:192.0.2.13'), 1);
  });
});

describe('keys', () => {
  test('key() answering undefined, null or "" falls back to the client address, not one bucket', async () => {
    for (const [i, nothing] of [undefined, null, ''].entries()) {
      const mw = rateLimit({ client: ctx.redis, algorithm: 'period', limit: 1, period: '1m', key: () => nothing, prefix: `nothing${i}:` });
      assert.equal((await hit(mw, '198.51.100.1')).status, 200);
      assert.equal((await hit(mw, '198.51.100.1')).status, 429, 'the same address is limited');
      assert.equal((await hit(mw, '198.51.100.2')).status, 200, `another address is not (key() -> ${JSON.stringify(nothing)})`);
      assert.equal(await ctx.redis.exists(`nothing${i}:198.51.100.2`), 1, 'the key is the address');
    }
  });

  test('an async key() answering nothing falls back too', async () => {
    const mw = rateLimit({ client: ctx.redis, algorithm: 'period', limit: 1, period: '1m', key: async () => undefined });
    assert.equal((await hit(mw, '198.51.100.3')).status, 200);
    assert.equal((await hit(mw, '198.51.100.4')).status, 200);
  });

  test('IPv6 clients are grouped by /56; IPv4-mapped addresses are IPv4', async () => {
    const mw = rateLimit({ client: ctx.redis, algorithm: 'period', limit: 2, period: '1m' });
    assert.equal((await hit(mw, '2001:db8:1234:5601::1')).status, 200);
    assert.equal((await hit(mw, '2001:db8:1234:56ff:abcd::9')).status, 200, 'same /56');
    assert.equal((await hit(mw, '2001:db8:1234:5642::7')).status, 429, 'a third address of the same /56 is limited');
    assert.equal((await hit(mw, '2001:db8:1234:5700::1')).status, 200, 'the next /56 is another client');
    assert.equal((await hit(mw, '203.0.113.9')).status, 200);
    assert.equal((await hit(mw, '::ffff:203.0.113.9')).status, 200);
    assert.equal((await hit(mw, '::ffff:203.0.113.9')).status, 429, '::ffff:203.0.113.9 is 203.0.113.9');
  });

  test('ipv6Subnet sets the grouping (false: the full address)', async () => {
    const full = rateLimit({ client: ctx.redis, algorithm: 'period', limit: 1, period: '1m', ipv6Subnet: false });
    assert.equal((await hit(full, '2001:db8:9::1')).status, 200);
    assert.equal((await hit(full, '2001:db8:9::2')).status, 200);
    assert.throws(() => rateLimit({ client: ctx.redis, limit: 1, period: 1, algorithm: 'period', ipv6Subnet: 129 }), /ipv6Subnet/);
  });
});

describe('Redis down or hung: answered within the timeout', () => {
  for (const how of ['stopped', 'SIGSTOPped']) {
    test(`Redis ${how}: fail-open lets the request through, fail-closed gives next(err), each within the timeout`, async () => {
      const own = await startServer();
      const client = new Redis({ port: own.port }); // the README's new Redis(): offline queue, retries
      client.on('error', () => {}); // reconnect errors while the server is down
      try {
        const open = rateLimit({ client, algorithm: 'period', limit: 100, period: '1m', failOpen: true });
        const closed = rateLimit({ client, algorithm: 'period', limit: 100, period: '1m', timeout: 300 });
        assert.equal((await hit(open)).status, 200);
        assert.equal((await hit(closed)).status, 200);
        if (how === 'stopped') await own.stop();
        else own.child.kill('SIGSTOP');
        const a = await hit(open);
        const b = await hit(closed);
        assert.equal(a.status, 200, 'fail-open: through');
        assert.equal(b.status, 500, 'fail-closed: next(err)');
        if (how === 'SIGSTOPped') {
          assert.ok(b.error instanceof RateLimitTimeoutError, String(b.error));
          assert.equal(b.error.code, 'ETIMEDOUT');
          assert.ok(b.ms >= 290, `not before the timeout (${b.ms} ms)`);
        }
        // ioredis alone would hold these for its reconnect retries (about 28 s) or forever (hung)
        assert.ok(a.ms < 5000 && b.ms < 5000, `answered in ${a.ms} ms and ${b.ms} ms`);
      } finally {
        client.disconnect();
        if (how === 'SIGSTOPped') own.child.kill('SIGCONT');
        await own.stop();
      }
    });
  }

  test('timeout must be a duration', () => {
    assert.throws(() => rateLimit({ client: ctx.redis, limit: 1, period: 1, algorithm: 'period', timeout: NaN }), /timeout must be a duration.*got NaN/);
  });
});

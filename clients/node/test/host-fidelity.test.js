'use strict';
// Regression suite "host-library fidelity" (issue 23): the same sequence of calls on the stock
// store (the host library's own Redis implementation: Lua and plain keys on the same server)
// and on the drop-in, side by side. Where they agree the test says so; where they differ on
// purpose the test pins both answers, so that the difference documented in README.md ("What
// each drop-in does differently from stock") is exactly the one there is.
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { RateLimiterRedis, RateLimiterUnion } = require('rate-limiter-flexible');
const { RedisStore } = require('rate-limit-redis');
const { ThrottlerStorageRedisService: StockThrottlerStorage } = require('@nest-lab/throttler-storage-redis');
const { ThrottlerStorageService: NestMemoryStorage } = require('@nestjs/throttler');
const { RateLimiterRedisModule, RateLimiterUnionModule, RedisModuleStore, ThrottlerStorageRedisModule } = require('..');
const { useServer } = require('../testing/servers');

const ctx = useServer({ before, after });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let n = 0;
/** The stock limiter and the drop-in, same options, each on keys of its own. */
function pair(opts) {
  n++;
  return {
    stock: new RateLimiterRedis({ storeClient: ctx.redis, keyPrefix: `stock${n}`, ...opts }),
    module: new RateLimiterRedisModule({ storeClient: ctx.redis, keyPrefix: `module${n}`, ...opts }),
  };
}
const settle = (p) => p.then((r) => r, (r) => (r instanceof Error ? r : { rejected: r }));
/** consumedPoints, remainingPoints, isFirstInDuration, and whether msBeforeNext is in the window (0 < ms ≤ window). */
const shape = (r, windowMs) => {
  const res = r && r.rejected ? r.rejected : r;
  if (!res) return res;
  return { rejected: !!(r && r.rejected), consumed: res.consumedPoints, remaining: res.remainingPoints, first: res.isFirstInDuration, inWindow: res.msBeforeNext > 0 && res.msBeforeNext <= windowMs };
};

describe('rate-limiter-flexible: RateLimiterRedisModule against RateLimiterRedis', () => {
  test('the same answers: consume to the points and past them, penalty, reward above 0, get, delete', async () => {
    const results = {};
    for (const [name, l] of Object.entries(pair({ points: 3, duration: 10 }))) {
      const out = [];
      for (let i = 0; i < 4; i++) out.push(shape(await settle(l.consume('k')), 10000));
      out.push(shape(await settle(l.penalty('k', 2)), 10000));
      out.push(shape(await settle(l.reward('k', 4)), 10000));
      out.push(shape(await l.get('k'), 10000));
      out.push(await l.delete('k'), await l.get('k'));
      results[name] = out;
    }
    assert.deepEqual(results.module, results.stock);
  });

  test('DIFFERENCE reward below zero: stock stores a negative count (extra credit), the module stops at 0', async () => {
    const { stock, module } = pair({ points: 3, duration: 10 });
    await stock.consume('k');
    await module.consume('k');
    assert.deepEqual([(await stock.reward('k', 3)).consumedPoints, (await module.reward('k', 3)).consumedPoints], [-2, 0]);
    // stock: 5 more consumes fit in the window (3 points + 2 credit); the module: 3
    const admitted = async (l) => {
      let ok = 0;
      for (let i = 0; i < 6; i++) if (!(await settle(l.consume('k'))).rejected) ok++;
      return ok;
    };
    assert.deepEqual([await admitted(stock), await admitted(module)], [5, 3]);
  });

  test('DIFFERENCE reward (or negative consume) on a missing key: stock starts a window at a negative count, the module stores nothing', async () => {
    const { stock, module } = pair({ points: 3, duration: 10 });
    const s = await stock.reward('k', 2);
    const m = await module.reward('k', 2);
    assert.deepEqual([s.consumedPoints, s.remainingPoints, s.msBeforeNext > 0], [-2, 5, true]);
    assert.deepEqual([m.consumedPoints, m.remainingPoints, m.msBeforeNext], [0, 3, 0]);
    assert.equal(await module.get('k'), null);
    const sn = await stock.consume('neg', -2);
    const mn = await module.consume('neg', -2);
    assert.deepEqual([sn.consumedPoints, mn.consumedPoints], [-2, 0]);
  });

  test('DIFFERENCE a reward back to exactly 0: stock keeps the key and its window, the module deletes the key (the next consume starts a new window)', async () => {
    const { stock, module } = pair({ points: 3, duration: 10 });
    for (const l of [stock, module]) {
      await l.consume('k', 2);
      await l.reward('k', 2);
    }
    const s = await stock.get('k');
    assert.deepEqual([s.consumedPoints, s.msBeforeNext > 0], [0, true]);
    assert.equal(await module.get('k'), null);
    await sleep(30);
    const sc = await stock.consume('k');
    const mc = await module.consume('k');
    assert.deepEqual([sc.consumedPoints, mc.consumedPoints], [1, 1]);
    assert.ok(sc.msBeforeNext < mc.msBeforeNext, `stock's window goes on (${sc.msBeforeNext} ms left), the module's restarts (${mc.msBeforeNext} ms)`);
  });

  test('the library\'s own RateLimiterUnion over RateLimiterRedisModule limiters counts as over stock limiters', async () => {
    const run = async (C, tag) => {
      const a = new C({ storeClient: ctx.redis, points: 2, duration: 10, keyPrefix: `${tag}-ua` });
      const b = new C({ storeClient: ctx.redis, points: 3, duration: 60, keyPrefix: `${tag}-ub` });
      const u = new RateLimiterUnion(a, b);
      const out = [];
      for (let i = 0; i < 4; i++) {
        const r = await u.consume('k').then((x) => ['ok', x], (x) => ['rejected', x]);
        out.push([r[0], Object.keys(r[1]).map((k) => k.replace(tag, '')), Object.values(r[1]).map((x) => x.consumedPoints)]);
      }
      return out;
    };
    assert.deepEqual(await run(RateLimiterRedisModule, 'm'), await run(RateLimiterRedis, 's'));
  });

  test('DIFFERENCE RateLimiterUnionModule (an addition, all or nothing) against the stock union', async () => {
    const stockA = new RateLimiterRedis({ storeClient: ctx.redis, points: 2, duration: 10, keyPrefix: 'su-a' });
    const stockB = new RateLimiterRedis({ storeClient: ctx.redis, points: 3, duration: 60, keyPrefix: 'su-b' });
    const modA = new RateLimiterRedisModule({ storeClient: ctx.redis, points: 2, duration: 10, keyPrefix: 'mu-a' });
    const modB = new RateLimiterRedisModule({ storeClient: ctx.redis, points: 3, duration: 60, keyPrefix: 'mu-b' });
    const stock = new RateLimiterUnion(stockA, stockB);
    const mod = new RateLimiterUnionModule(modA, modB);
    for (let i = 0; i < 4; i++) {
      await stock.consume('k').catch(() => {});
      await mod.consume('k').catch(() => {});
    }
    // stock: every limiter is charged for every request, refused ones included
    assert.deepEqual([(await stockA.get('k')).consumedPoints, (await stockB.get('k')).consumedPoints], [4, 4]);
    // the module: a refused request charges no limiter
    assert.deepEqual([(await modA.get('k')).consumedPoints, (await modB.get('k')).consumedPoints], [2, 2]);
    // refused: stock reports the count after charging, the module the count the request would make
    const s = await stock.consume('k').catch((r) => r);
    const m = await mod.consume('k').catch((r) => r);
    assert.deepEqual([Object.keys(s), s['su-a'].consumedPoints], [['su-a', 'su-b'], 5]);
    assert.deepEqual([Object.keys(m), m['mu-a'].consumedPoints], [['mu-a'], 3]);
  });
});

describe('@nestjs/throttler: ThrottlerStorageRedisModule against @nest-lab/throttler-storage-redis and the library\'s own storage', () => {
  const LIMIT = 2;
  const TTL = 1000;
  const BLOCK = 300;
  async function sequence(storage, key) {
    const hit = () => storage.increment(key, TTL, LIMIT, BLOCK, 'default');
    const out = [];
    for (let i = 0; i < 4; i++) out.push(await hit()); // 2 admitted, then blocked
    await sleep(BLOCK + 100); // the block is over, the window is not (TTL 1000 ms)
    out.push(await hit()); // sustained traffic after the block
    out.push(await hit());
    return out.map((r) => [r.totalHits, r.isBlocked]);
  }

  test('DIFFERENCE after a block ends inside the window: stock re-blocks (it counted the blocked hits), the module admits (as @nestjs/throttler\'s own storage)', async () => {
    const stock = await sequence(new StockThrottlerStorage(ctx.redis), 'stock-tracker');
    const module = await sequence(new ThrottlerStorageRedisModule(ctx.redis), 'module-tracker');
    const memory = new NestMemoryStorage();
    const reference = await sequence(memory, 'memory-tracker');
    memory.onApplicationShutdown();
    // the first block: the same decisions; stock also counts the blocked hits (totalHits 3, 4)
    assert.deepEqual(stock.slice(0, 4), [[1, false], [2, false], [3, true], [4, true]]);
    assert.deepEqual(module.slice(0, 4), [[1, false], [2, false], [3, true], [3, true]]);
    // after the block: stock blocks again at once; the module starts a new window
    assert.deepEqual(stock.slice(4), [[5, true], [6, true]]);
    assert.deepEqual(module.slice(4), [[1, false], [2, false]]);
    assert.deepEqual(reference.slice(4), module.slice(4));
  });
});

describe('express-rate-limit: RedisModuleStore against rate-limit-redis', () => {
  const stores = () => {
    n++;
    const sendCommand = (...args) => ctx.redis.call(...args);
    const stock = new RedisStore({ sendCommand, prefix: `erl-stock${n}:` });
    const module = new RedisModuleStore({ sendCommand, prefix: `erl-module${n}:` });
    for (const s of [stock, module]) s.init({ windowMs: 60000, limit: 5 });
    return { stock, module };
  };

  test('the same answers: increment, get, decrement above 0, resetKey', async () => {
    const out = {};
    for (const [name, s] of Object.entries(stores())) {
      const seq = [];
      for (let i = 0; i < 3; i++) seq.push((await s.increment('ip')).totalHits);
      seq.push((await s.get('ip')).totalHits);
      await s.decrement('ip');
      seq.push((await s.get('ip')).totalHits);
      const reset = (await s.increment('ip')).resetTime.getTime() - Date.now();
      seq.push(reset > 0 && reset <= 60000);
      out[name] = seq;
    }
    assert.deepEqual(out.module, out.stock);
  });

  test('DIFFERENCE get() on a missing key: stock {totalHits: NaN, resetTime: now}, the module undefined (the Store contract\'s "no record")', async () => {
    const { stock, module } = stores();
    const s = await stock.get('nobody');
    assert.ok(Number.isNaN(s.totalHits));
    assert.equal(await module.get('nobody'), undefined);
  });

  test('DIFFERENCE decrement at 0 or on a missing key: stock goes negative (a key without expiry), the module stops at 0', async () => {
    const { stock, module } = stores();
    await stock.decrement('gone');
    await module.decrement('gone');
    assert.equal((await stock.get('gone')).totalHits, -1);
    assert.equal(await ctx.redis.pttl(stock.prefixKey('gone')), -1, 'stock leaves a key that never expires');
    assert.equal(await module.get('gone'), undefined);
    assert.equal(await ctx.redis.exists(`${module.prefix}gone`), 0);
  });

  test('resetExpiryOnChange (a window restarted by every hit) is refused, not ignored', () => {
    assert.throws(() => new RedisModuleStore({ sendCommand: () => {}, resetExpiryOnChange: true }), /resetExpiryOnChange/);
  });
});

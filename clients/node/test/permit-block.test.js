'use strict';
// PermitBlock against a real server: never more admitted than the server granted, one refill in
// flight, refunds at the block's end (never after a fixed window's end), errors, close().
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { RateLimit, PermitBlock } = require('..');
const { useServer, commandCalls } = require('../testing/servers');

const ctx = useServer({ before, after });
const rl = () => new RateLimit(ctx.redis);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const fresh = () => `pb:${process.pid}:${n++}`;
const HOUR_TOKEN = (capacity) => ({ algorithm: 'token', capacity, rate: 1, period: '1h' });

test('many concurrent consumers on four instances: admitted + tokens left = capacity, never more', async () => {
  const key = fresh();
  const blocks = [0, 1, 2, 3].map(() => new PermitBlock(rl(), key, HOUR_TOKEN(50), { size: 8, refillBelow: 2 }));
  const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => blocks[i % 4].take()));
  const admitted = outcomes.filter((d) => d.allowed).length;
  assert.ok(admitted <= 50 && admitted >= 50 - 4 * 8 * 2, `admitted ${admitted}`);
  for (const d of outcomes.filter((x) => !x.allowed)) assert.ok(d.retryAfterMs > 0);
  await Promise.all(blocks.map((b) => b.close()));
  const info = await rl().info(key);
  assert.equal(admitted + info.tokens, 50); // every unused permit went back, none admitted without a grant
});

test('one refill in flight: 100 concurrent takes on an empty instance of size 10 make 10 grants', async () => {
  const key = fresh();
  const before = (await commandCalls(ctx.server.port))['rl.token'] || 0;
  const b = new PermitBlock(rl(), key, HOUR_TOKEN(1000), { size: 10 });
  const outcomes = await Promise.all(Array.from({ length: 100 }, () => b.take()));
  assert.ok(outcomes.every((d) => d.allowed));
  const calls = (await commandCalls(ctx.server.port))['rl.token'] - before;
  assert.equal(calls, 10);
  assert.equal(b.stats.calls, 10);
  assert.equal((await rl().info(key)).tokens, 900);
  await b.close();
});

test('a partial grant: the fallback takes what is left, then a refused single permit carries retryAfterMs', async () => {
  const key = fresh();
  const b = new PermitBlock(rl(), key, HOUR_TOKEN(15), { size: 10 });
  for (let i = 0; i < 15; i++) assert.equal((await b.take()).allowed, true, `take ${i}`);
  const d = await b.take();
  assert.equal(d.allowed, false);
  assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= 3600000);
  assert.equal(b.stats.granted, 15);
  assert.equal(b.stats.calls, 5); // 10; then 10 refused + 5; then 10 refused + 1 refused
  await b.close();
});

test('refund at the end of the lifetime (token bucket)', async () => {
  const key = fresh();
  const b = new PermitBlock(rl(), key, HOUR_TOKEN(100), { size: 10, lifetime: 150 });
  for (let i = 0; i < 3; i++) await b.take();
  assert.equal((await rl().info(key)).tokens, 90);
  await sleep(400);
  assert.equal((await rl().info(key)).tokens, 97);
  assert.equal(b.stats.refunded, 7);
  assert.equal(b.held, 0);
  await b.close();
});

test('fixed window: refunded before the window ends', async () => {
  const key = fresh();
  const b = new PermitBlock(rl(), key, { algorithm: 'period', limit: 100, period: '10s' }, { size: 10, lifetime: 150 });
  for (let i = 0; i < 4; i++) await b.take();
  await sleep(400);
  assert.equal((await rl().info(key)).used, 4);
  await b.close();
});

test('fixed window: never refunded after the window ends (dropped instead)', async () => {
  const key = fresh();
  // a guard wider than the window: no refund can surely land in it, so the unused are dropped
  const b = new PermitBlock(rl(), key, { algorithm: 'period', limit: 100, period: 300 }, { size: 10, lifetime: '10s', refundGuard: 1000 });
  await b.take();
  await sleep(350);
  // the next window, used by someone else: a late refund would cancel their use
  const other = await rl().period(key, { limit: 100, period: 300, cost: 5 });
  assert.equal(other.allowed, true);
  await sleep(100);
  await b.close();
  assert.equal(b.stats.refunded, 0);
  assert.equal(b.stats.dropped, 9);
  assert.equal((await rl().info(key)).used, 5);
});

test('fixed window: a block never outlives the window it was granted in', async () => {
  const key = fresh();
  const b = new PermitBlock(rl(), key, { algorithm: 'period', limit: 100, period: 200 }, { size: 10, lifetime: '10s', refundGuard: 1000 });
  const d = await b.take();
  assert.ok(d.resetAfterMs <= 200);
  await sleep(250);
  assert.equal(b.held, 0);
  await b.take(); // a new grant, in the new window
  assert.equal(b.stats.grants, 2);
  await b.close();
});

test('errors propagate to every waiting caller, and the instance recovers', async () => {
  const key = fresh();
  await ctx.redis.set(key, 'a string');
  const b = new PermitBlock(rl(), key, HOUR_TOKEN(10), { size: 5 });
  const outcomes = await Promise.allSettled([b.take(), b.take(), b.take()]);
  for (const o of outcomes) assert.equal(o.status, 'rejected');
  assert.match(String(outcomes[0].reason), /WRONGTYPE/);
  await ctx.redis.del(key);
  assert.equal((await b.take()).allowed, true);
  await b.close();
});

test('close() gives the unused permits back and refuses further takes', async () => {
  const key = fresh();
  const b = new PermitBlock(rl(), key, HOUR_TOKEN(100), { size: 10 });
  await b.take();
  await b.take();
  await b.close();
  assert.equal((await rl().info(key)).tokens, 98);
  await assert.rejects(b.take(), /closed/);
});

test('GCRA and leaky NODELAY carry blocks; slide and leaky in delay mode are refused', async () => {
  for (const limit of [
    { algorithm: 'throttle', maxBurst: 19, count: 1, period: 3600 * 1000 },
    { algorithm: 'leaky', capacity: 20, rate: 1, period: '1h', nodelay: true },
  ]) {
    const key = fresh();
    const b = new PermitBlock(rl(), key, limit, { size: 5 });
    for (let i = 0; i < 3; i++) assert.equal((await b.take()).allowed, true);
    await b.close();
    // the same as three single calls on another key
    const control = fresh();
    const { algorithm, ...params } = limit;
    for (let i = 0; i < 3; i++) await (algorithm === 'throttle' ? rl().throttle(control, params) : rl().leaky(control, params));
    assert.equal((await rl().peek(key)).remaining, (await rl().peek(control)).remaining, algorithm);
  }
  assert.throws(() => new PermitBlock(rl(), 'k', { algorithm: 'slide', limit: 5, window: '1s' }, { size: 5 }), /sliding window/);
  assert.throws(() => new PermitBlock(rl(), 'k', { algorithm: 'leaky', capacity: 5, rate: 1, period: '1s' }, { size: 5 }), /nodelay/);
  assert.throws(() => new PermitBlock(rl(), 'k', HOUR_TOKEN(5), { size: 0 }), /size/);
  // GCRA: a grant is at most maxBurst + 1 permits (CL.THROTTLE refuses more whatever the state)
  const gcra = { algorithm: 'throttle', maxBurst: 4, count: 1, period: 3600 * 1000 };
  assert.throws(() => new PermitBlock(rl(), 'k', gcra, { size: 6 }), /at most maxBurst \+ 1 = 5/);
  const whole = new PermitBlock(rl(), fresh(), gcra, { size: 5 });
  for (let i = 0; i < 5; i++) assert.equal((await whole.take()).allowed, true);
  assert.equal(whole.stats.calls, 1, 'size = maxBurst + 1 is granted in one call');
  await whole.close();
  assert.throws(() => new PermitBlock(rl(), 'k', { ...HOUR_TOKEN(5), ban: '1m' }, { size: 5 }), /ban/);
});

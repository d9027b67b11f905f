'use strict';
// ThrottlerStorageRedisModule: @nestjs/throttler's storage contract, one RL.PERIOD … BAN … CLEAR per hit.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { ThrottlerStorageRedisModule, ThrottlerStorageRedisService } = require('..');
const { startServer, commandCalls } = require('../testing/servers');

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

test('limit hits per ttl, then blocked for blockDuration; times in whole seconds, rounded up', async () => {
  const s = new ThrottlerStorageRedisModule(redis);
  assert.equal(ThrottlerStorageRedisService, ThrottlerStorageRedisModule);
  const hit = () => s.increment('tracker', 10000, 2, 10000, 'default');
  assert.deepEqual(await hit(), { totalHits: 1, timeToExpire: 10, isBlocked: false, timeToBlockExpire: 0 });
  assert.deepEqual(await hit(), { totalHits: 2, timeToExpire: 10, isBlocked: false, timeToBlockExpire: 0 });
  const blocked = await hit();
  assert.deepEqual([blocked.totalHits, blocked.isBlocked, blocked.timeToBlockExpire], [3, true, 10]);
  const still = await hit();
  assert.deepEqual([still.isBlocked, still.timeToBlockExpire <= 10], [true, true]);
  // one key per (tracker, throttler), holding the module's type
  assert.equal(await redis.type('throttler:tracker:default'), 'ratelimit');
});

test('a longer blockDuration keeps the tracker out past the window', async () => {
  const s = new ThrottlerStorageRedisModule(redis, { prefix: 'nest:' });
  await s.increment('t2', 100, 1, 60000, 'short');
  const blocked = await s.increment('t2', 100, 1, 60000, 'short');
  assert.deepEqual([blocked.isBlocked, blocked.timeToBlockExpire], [true, 60]);
  await new Promise((r) => setTimeout(r, 150)); // the window is over, the block is not
  assert.equal((await s.increment('t2', 100, 1, 60000, 'short')).isBlocked, true);
  // throttlers are independent
  assert.equal((await s.increment('t2', 100, 1, 60000, 'other')).isBlocked, false);
});

test('a blockDuration shorter than ttl: blocked for blockDuration, then hit 1 of a new window (BAN … CLEAR), as NestJS\' in-memory storage', async () => {
  const s = new ThrottlerStorageRedisModule(redis);
  const hit = () => s.increment('t6', 60000, 2, 300, 'short-block');
  assert.deepEqual(await hit(), { totalHits: 1, timeToExpire: 60, isBlocked: false, timeToBlockExpire: 0 });
  assert.equal((await hit()).totalHits, 2);
  const blocked = await hit();
  assert.deepEqual([blocked.totalHits, blocked.isBlocked, blocked.timeToBlockExpire], [3, true, 1]);
  // The block clears the window: the key lives only as long as the block.
  const pttl = await redis.pttl('throttler:t6:short-block');
  assert.ok(pttl > 0 && pttl <= 300, `${pttl}`);
  assert.equal((await hit()).isBlocked, true);
  await new Promise((r) => setTimeout(r, 350)); // the block is over, the 60 s window would not be
  assert.deepEqual(await hit(), { totalHits: 1, timeToExpire: 60, isBlocked: false, timeToBlockExpire: 0 });
  assert.equal((await hit()).totalHits, 2);
  assert.equal((await hit()).isBlocked, true);
});

test('after the block and the window end, the tracker starts afresh', async () => {
  const s = new ThrottlerStorageRedisModule(redis);
  await s.increment('t3', 200, 1, 200, 'd');
  assert.equal((await s.increment('t3', 200, 1, 200, 'd')).isBlocked, true);
  await new Promise((r) => setTimeout(r, 450));
  assert.deepEqual(await s.increment('t3', 200, 1, 200, 'd'), { totalHits: 1, timeToExpire: 1, isBlocked: false, timeToBlockExpire: 0 });
});

test('one command per hit', async () => {
  const s = new ThrottlerStorageRedisModule(redis);
  const before = await commandCalls(server.port);
  for (let i = 0; i < 10; i++) await s.increment('t4', 1000, 3, 1000, 'd');
  const after = await commandCalls(server.port);
  const total = Object.keys(after).reduce((n, k) => n + (k === 'info' ? 0 : after[k] - (before[k] || 0)), 0);
  assert.equal(total, 10);
});

test('limit 0 blocks every hit and stores nothing', async () => {
  const s = new ThrottlerStorageRedisModule(redis);
  const r = await s.increment('t5', 10000, 0, 5000, 'zero');
  assert.deepEqual(r, { totalHits: 1, timeToExpire: 10, isBlocked: true, timeToBlockExpire: 5 });
  assert.equal(await redis.exists('throttler:t5:zero'), 0);
});

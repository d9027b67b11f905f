// Typed usage of redis-ratelimit: compiled with `tsc --noEmit` by test/types.test.js.
import Redis, { Cluster } from 'ioredis';
import { createClient } from 'redis';
import {
  RateLimit,
  PermitBlock,
  Decision,
  AllDecision,
  Lease,
  rateLimit,
  ModuleNotLoadedError,
  RateLimiterRedisModule,
  RateLimiterUnionModule,
  RateLimiterQueueModule,
  ThrottlerStorageRedisModule,
  ThrottlerStorageRedisService,
  RedisModuleStore,
  keySlot,
  registerRateLimitMetrics,
} from 'redis-ratelimit';

async function main(): Promise<void> {
  const redis = new Redis();
  const cluster = new Cluster([{ host: '127.0.0.1', port: 7000 }]);
  const nodeRedis = createClient();
  const rl = new RateLimit(redis, { prefix: 'api:' });
  new RateLimit(cluster);
  new RateLimit(nodeRedis);
  new RateLimit((...args: string[]) => nodeRedis.sendCommand(args));

  const d: Decision = await rl.token('k', { capacity: 10, rate: 1, period: '1s', cost: 2, step: true, ban: '1h', wait: 5000, dryRun: false });
  const allowed: boolean = d.allowed;
  const retry: number = d.retryAfterMs + d.resetAfterMs + d.limit + d.remaining;
  await rl.period('k', { limit: 5, period: '1d', align: '8h' });
  await rl.period('k', { limit: 5, period: 86400000, align: true, at: 4000000000000 });
  await rl.period('k', { limit: 5, period: '1m', keepPeriod: true, ban: '10s', clear: true });
  await rl.slide('k', { limit: 100, window: '1m', buckets: 60 });
  await rl.leaky('k', { capacity: 5, rate: 1, period: '1s', nodelay: true });
  await rl.leaky('k', { capacity: 5, rate: 1, period: '1s', delay: 2 });
  await rl.limit('k', { algorithm: 'slide', limit: 3, window: '1s' });
  await rl.throttle('k', { maxBurst: 5, count: 1, period: '1s', quantity: 2 });
  const all: AllDecision = await rl.all([
    { key: '{u}:s', algorithm: 'token', capacity: 10, rate: 10, period: '1s' },
    { key: '{u}:d', algorithm: 'period', limit: 1000, period: '1d', cost: 1 },
  ]);
  const binding: number = all.index + all.details.length;
  const refunded: Decision | null = await rl.refund('k', 3);
  const charged: Decision | null = await rl.charge('k', 2, { at: 1 });
  const lease: Lease = await rl.acquire('exports', { limit: 10, lease: '2m', wait: '30s' });
  if (lease.id !== null) await rl.release('exports', lease.id);
  const peek: Decision | null = await rl.peek('k');
  const info = await rl.info('k');
  if (info) console.log(info.algorithm, info.ttlMs);

  const mw = rateLimit({ client: redis, algorithm: 'period', limit: 100, period: '1m', key: (req) => String(req.ip), cost: () => 1 });
  rateLimit({ client: rl, capacity: 10, rate: 1, period: '1s', failOpen: true });
  void mw;

  const limiter = new RateLimiterRedisModule({ storeClient: redis, points: 5, duration: 1, keyPrefix: 'x', blockDuration: 10 });
  const res = await limiter.consume('user', 1);
  const ms: number = res.msBeforeNext;
  await limiter.penalty('user', 1);
  await limiter.reward('user', 1);
  await limiter.block('user', 10);
  await limiter.set('user', 3, 10);
  const got = await limiter.get('user');
  const deleted: boolean = await limiter.delete('user');
  const union = new RateLimiterUnionModule(limiter, new RateLimiterRedisModule({ storeClient: redis, points: 100, duration: 60, keyPrefix: 'y' }));
  const u: Record<string, { remainingPoints: number }> = await union.consume('user');
  const queue = new RateLimiterQueueModule(limiter, { timeoutMs: '5s', maxQueueSize: 100 });
  const left: number = await queue.removeTokens(1, 'jobs');

  const storage: ThrottlerStorageRedisModule = new ThrottlerStorageRedisService(cluster);
  const rec = await storage.increment('tracker', 60000, 10, 60000, 'default');
  const blocked: boolean = rec.isBlocked;

  const store = new RedisModuleStore({ sendCommand: (...args: string[]) => nodeRedis.sendCommand(args), prefix: 'rl:' });
  store.init({ windowMs: 60000 });
  const hits: number = (await store.increment('ip')).totalHits;

  const slot: number = keySlot('{user42}:s');
  const e: unknown = null;
  if (e instanceof ModuleNotLoadedError) console.log(e.command, e.cause.message);
  console.log(allowed, retry, binding, refunded, charged, peek, ms, got, deleted, u, left, blocked, hits, slot);
}
void main;

// Policies: limits the server holds (RL.POLICY, RL.HIT).
export async function policies(rl: RateLimit, redis: Redis): Promise<void> {
  await rl.setPolicy('free', { algorithm: 'slide', limit: 100, window: '1m' }, { ban: '10m' });
  await rl.setPolicy('free', { algorithm: 'token', capacity: 1000, rate: 100, period: '1m' }, { for: 'tenant42', shadow: true });
  const d: Decision = await rl.hit('free', 'tenant42', { cost: 2, dryRun: true });
  // DEADLINE: a call the server runs after this instant counts nothing
  await rl.hit('free', 'tenant42', { deadline: Date.now() + 500 });
  await rl.token('k', { capacity: 5, rate: 1, period: '1s', deadline: Date.now() + 500 });
  registerRateLimitMetrics({}, redis, { topKeys: 5, timeout: '2s' });
  const def = await rl.getPolicy('free');
  if (def) console.log(def.algorithm, def.banMs, def.shadow, def.limit);
  const names: string[] = await rl.policies();
  await rl.all([{ key: '{t}:s', algorithm: 'token', capacity: 5, rate: 1, period: '1s' }, { key: '{t}:d', policy: 'free', cost: 2 }]);
  const stats = await rl.policyStats('free');
  const n: number = stats.calls + stats.admitted + stats.limited + stats.shadowLimited + stats.nearLimit;
  const gone: boolean = await rl.deletePolicy('free', { for: 'tenant42' });
  rateLimit({ client: redis, policy: 'free', key: (req) => String(req.headers['x-tenant']) });
  console.log(d, names, n, gone);
}

// permit blocks: a hot key's permits taken 100 at a time
async function permitBlocks(rl: RateLimit): Promise<number> {
  const block = new PermitBlock(rl, 'api:global', { algorithm: 'token', capacity: 50000, rate: 50000, period: '1s' }, { size: 100, lifetime: '500ms', refillBelow: 20 });
  const d: Decision = await block.take();
  const window = new PermitBlock(rl, 'llm:gpt', { algorithm: 'period', limit: 1000, period: '1m' }, { size: 10, refundGuard: 200 });
  await window.close();
  await block.close();
  return d.remaining + block.held + block.stats.refunded;
}
void permitBlocks;

// Must NOT compile: test/types.test.js checks that tsc rejects each marked line.
import Redis from 'ioredis';
import { RateLimit, PermitBlock, rateLimit } from 'redis-ratelimit';

async function bad(): Promise<void> {
  const rl = new RateLimit(new Redis());
  await rl.token('k', { capacity: '10', rate: 1, period: '1s' }); // capacity is a number
  await rl.period('k', { limit: 5 }); // period is required
  await rl.slide('k', { limit: 5, window: '1m', step: true }); // no STEP on a sliding window
  const n: number = (await rl.token('k', { capacity: 1, rate: 1, period: 1 })).allowed; // boolean
  rateLimit({ algorithm: 'period', limit: 5, period: '1m' }); // client is required
  const info = await rl.info('k');
  if (info) void info.used.toFixed(); // used is a field of period and slide limiters only: narrow on algorithm
  rateLimit({ client: rl, limit: 1, period: 1, algorithm: 'period', timeout: true }); // timeout is a duration
  void n;
}
void bad;
export async function badPolicies(rl: RateLimit): Promise<void> {
  await rl.setPolicy('free', { algorithm: 'slide', limit: 100, window: '1m', cost: 2 }); // no cost in a policy
  rateLimit({ client: rl, policy: 'free', ban: '1m' }); // ban belongs to the server policy
}
export function badBlocks(rl: RateLimit): void {
  new PermitBlock(rl, 'k', { algorithm: 'slide', limit: 5, window: '1s' }, { size: 10 }); // no blocks on a sliding window
  new PermitBlock(rl, 'k', { algorithm: 'leaky', capacity: 5, rate: 1, period: '1s' }, { size: 10 }); // leaky needs nodelay: true
  new PermitBlock(rl, 'k', { algorithm: 'token', capacity: 5, rate: 1, period: '1s', cost: 2 }, { size: 10 }); // the block sets the cost
  new PermitBlock(rl, 'k', { algorithm: 'token', capacity: 5, rate: 1, period: '1s' }, {}); // size is required
}

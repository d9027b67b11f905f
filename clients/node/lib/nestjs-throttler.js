'use strict';
/**
 * @nestjs/throttler storage on the module: ThrottlerStorage.increment(key, ttl, limit,
 * blockDuration, throttlerName) is one command on one key per (tracker, throttler):
 *
 *     RL.PERIOD <prefix><key>:<throttlerName> <limit> <ttl ms> BAN <blockDuration ms> CLEAR
 *
 * The fixed window counts up to `limit` hits per `ttl`; the hit that finds it full is refused and
 * starts the module's penalty box for `blockDuration`, during which every hit is refused; CLEAR
 * clears the window as the block starts, so the first hit after the block starts a new window
 * (the stock storage resets its hits when the block expires). Times are returned in whole
 * seconds rounded up, as @nestjs/throttler expects.
 *
 * Difference from the stock Lua storage (@nest-lab/throttler-storage-redis), documented in the
 * README: a refused hit is not counted (totalHits stays at limit + 1, which is all the guard
 * reads).
 */
const { Transport } = require('./transport');
const { toMs, toCount } = require('./duration');

class ThrottlerStorageRedisModule {
  /**
   * @param {object} client  ioredis Redis or Cluster, or node-redis client or cluster
   * @param {{prefix?: string}} [options]  prefix of every key (default "throttler:")
   */
  constructor(client, options = {}) {
    this.redis = client;
    this.transport = Transport.of(client);
    this.prefix = options.prefix === undefined ? 'throttler:' : options.prefix;
  }

  /**
   * @param {string} key  the guard's tracker key
   * @param {number} ttl  window, ms
   * @param {number} limit  hits per window
   * @param {number} blockDuration  ms refused once the limit is passed
   * @param {string} throttlerName
   * @returns {Promise<{totalHits: number, timeToExpire: number, isBlocked: boolean, timeToBlockExpire: number}>}
   */
  async increment(key, ttl, limit, blockDuration, throttlerName) {
    const ttlMs = toMs(Math.ceil(ttl), 'ttl');
    const max = toCount(limit, 'limit');
    const blockMs = blockDuration === undefined || blockDuration === null ? ttlMs : toMs(Math.ceil(blockDuration), 'blockDuration');
    if (max === 0) {
      // limit 0: every hit is over the limit (the module's limits start at 1); nothing to store.
      return { totalHits: 1, timeToExpire: Math.ceil(ttlMs / 1000), isBlocked: true, timeToBlockExpire: Math.ceil(blockMs / 1000) };
    }
    const k = this.transport.serverKey(`${this.prefix}${key}:${throttlerName}`);
    const args = ['RL.PERIOD', k, max, Math.max(ttlMs, 1)];
    if (blockMs > 0) args.push('BAN', blockMs, 'CLEAR');
    const r = await this.transport.send(args);
    const allowed = Number(r[0]) === 1;
    const remaining = Number(r[2]);
    const retryAfterMs = Number(r[3]);
    const resetAfterMs = Number(r[4]);
    return {
      totalHits: allowed ? max - remaining : max + 1,
      timeToExpire: Math.ceil(resetAfterMs / 1000),
      isBlocked: !allowed,
      timeToBlockExpire: allowed ? 0 : Math.ceil(Math.max(retryAfterMs, 0) / 1000),
    };
  }

  /** Nest lifecycle hook: the client belongs to the caller, so nothing to close. */
  onModuleDestroy() {}
}

module.exports = { ThrottlerStorageRedisModule, ThrottlerStorageRedisService: ThrottlerStorageRedisModule };

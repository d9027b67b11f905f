'use strict';
/**
 * express-rate-limit Store on the module. The store counts, express-rate-limit decides:
 *
 *   increment(key)  RL.PERIOD <prefix>rl:<key> <ceiling> <windowMs>  (count = ceiling − remaining)
 *   decrement(key)  RL.REFUND <prefix>rl:<key> 1                       (stops at 0)
 *   get(key)        RL.PEEK <prefix>rl:<key>                           (read-only)
 *   resetKey(key)   DEL <prefix>rl:<key> <prefix><key>
 *
 * Each is one command; the window starts at a fresh key's first hit and the key expires by
 * itself when it ends. Give it `sendCommand` (the rate-limit-redis option) or `client`.
 *
 * The count lives beside rate-limit-redis' string counter (`<prefix><key>`), never on it: a
 * service switched on a live Redis never meets WRONGTYPE. When a window starts, the stock
 * count left there is carried over once (GET, RL.CHARGE; `migrateFromStock: false` skips it).
 */
const { Transport } = require('./transport');
const { Counter, UNBOUNDED, ceilingFor } = require('./counter');

class RedisModuleStore {
  /**
   * @param {{sendCommand?: (...args: string[]) => Promise<unknown>, client?: object, prefix?: string}} options
   */
  constructor(options) {
    const target = options && (options.sendCommand || options.client);
    if (!target) throw new TypeError('RedisModuleStore needs sendCommand or client');
    if (options.resetExpiryOnChange) {
      // rate-limit-redis' option restarts the window on every hit (a PEXPIRE per hit): a count
      // that never expires while traffic goes on. The module's window is fixed from its first
      // hit; refusing here beats a silently different limit.
      throw new TypeError('RedisModuleStore does not support resetExpiryOnChange (the window runs from its first hit): remove the option');
    }
    this.transport = Transport.of(target);
    this.counter = new Counter(this.transport);
    /** Keys are `prefix + key` (default "rl:", as rate-limit-redis). */
    this.prefix = options.prefix === undefined ? 'rl:' : options.prefix;
    this.migrateFromStock = options.migrateFromStock !== false;
    /** The counts live in Redis, shared by every process. */
    this.localKeys = false;
    this.windowMs = 60000;
    this.ceiling = UNBOUNDED;
  }

  /** express-rate-limit passes its options once: windowMs is the window of every count. */
  init(options) {
    if (options && options.windowMs > 0) this.windowMs = options.windowMs;
    this.ceiling = ceilingFor(options && options.limit);
  }

  /** The module's count for `key`: `<prefix>rl:<key>`, beside rate-limit-redis' `<prefix><key>`. */
  _key(key) {
    return `${this.prefix}rl:${key}`;
  }

  async increment(key) {
    const r = await this.counter.add(this._key(key), 1, this.windowMs, this.ceiling);
    const carried = r.count === 1 && this.migrateFromStock ? await this.counter.carryOver(this.prefix + key, this._key(key)) : 0;
    return { totalHits: r.count + carried, resetTime: new Date(Date.now() + r.resetAfterMs) };
  }

  async decrement(key) {
    await this.counter.subtract(this._key(key), 1);
  }

  async get(key) {
    const r = await this.counter.peek(this._key(key));
    if (!r) return undefined;
    return { totalHits: r.count, resetTime: new Date(Date.now() + r.resetAfterMs) };
  }

  async resetKey(key) {
    await this.counter.remove(this._key(key));
    if (this.migrateFromStock) await this.counter.remove(this.prefix + key);
  }
}

module.exports = { RedisModuleStore };

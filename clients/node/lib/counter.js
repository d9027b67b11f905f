'use strict';
/**
 * The counter the host libraries' stores keep (the store counts, the library decides), as one
 * module command each: a fixed window whose limit the library's counts do not reach,
 *
 *     RL.PERIOD key <ceiling> <window ms> [COST <points>] [KEEPPERIOD]
 *
 * admits every request the library could still accept, so the count is `ceiling − remaining`,
 * the window starts at the first count of a fresh key and the key expires by itself when it
 * ends — INCRBY plus PEXPIRE NX, atomically, without Lua. A window of ten years stands for
 * "never expires".
 *
 * The ceiling is 2^32 − 1 when every threshold the library compares counts with is below 2^31
 * (the module then keeps the limiter in its 48-byte form, and the call costs the server about
 * 15 % less than with a 10^12 limit, which needs the 80-byte form), else 10^12, the module's
 * largest. A count that would pass the ceiling is refused by the module (nothing stored); the
 * counter then reports `count + points`, which is above every threshold, so the library decides
 * exactly as with an unbounded count.
 */
const { TEN_YEARS_MS } = require('./duration');
const { infoFields } = require('./commands');

/** The module's largest count. */
const UNBOUNDED = 1000000000000;
/** The ceiling used when every threshold is below 2^31. */
const CEILING_32 = 4294967295;
/** The period that stands for "never expires" (the module's longest). */
const NEVER_MS = TEN_YEARS_MS;

/** Window length to send: whole ms, or NEVER_MS for 0 / negative ("no expiry"). */
function windowMs(ms) {
  return ms > 0 ? Math.min(Math.ceil(ms), NEVER_MS) : NEVER_MS;
}

/** The ceiling for counts compared with thresholds up to `largest` (a number; anything else: 10^12). */
function ceilingFor(largest) {
  return typeof largest === 'number' && largest >= 0 && largest < 2147483648 ? CEILING_32 : UNBOUNDED;
}

/** The count before a DRYRUN COST 1 reply (RL.PEEK, RL.REFUND): an admitted one took 1 off `remaining`. */
function countOfProbe(r) {
  return Number(r[1]) - Number(r[2]) - (Number(r[0]) === 1 ? 1 : 0);
}

class Counter {
  /** @param {import('./transport').Transport} transport */
  constructor(transport) {
    this.transport = transport;
  }

  /**
   * Adds `points` (≥ 0) to the count at `key` in a window of `ms`; resolves to
   * `{count, resetAfterMs}` after it. `resetAfterMs` is 0 while nothing is counted.
   * @param {number} [ceiling]  see ceilingFor (default 10^12)
   * @param {boolean} [keepPeriod]  `ms` starts a new window only: a window in force keeps its
   *   own length and end (RL.PERIOD … KEEPPERIOD), as a TTL set when the key is created
   */
  add(key, points, ms, ceiling = UNBOUNDED, keepPeriod = false) {
    const args = ['RL.PERIOD', this.transport.serverKey(key), ceiling, windowMs(ms)];
    if (points !== 1) args.push('COST', points); // COST 1 is the default: fewer arguments to parse
    if (keepPeriod) args.push('KEEPPERIOD');
    return this.transport.send(args).then((r) => {
      const count = Number(r[1]) - Number(r[2]);
      return { count: Number(r[0]) === 1 ? count : count + points, resetAfterMs: Number(r[4]) };
    });
  }

  /**
   * Replaces whatever `key` holds by a fresh count of `points` in a window of `ms` (0: never
   * expires): RL.PERIOD … COST points FRESH (a count of 0 deletes the key).
   */
  async fresh(key, points, ms) {
    const r = await this.transport.send(['RL.PERIOD', this.transport.serverKey(key), ceilingFor(points), windowMs(ms), 'COST', points, 'FRESH']);
    return { count: Number(r[1]) - Number(r[2]), resetAfterMs: Number(r[4]) };
  }

  /**
   * Takes `points` (≥ 1) off the count (RL.REFUND; it stops at 0). Resolves to the count and
   * time to reset after it, or null when there was no count.
   */
  async subtract(key, points) {
    const r = await this.transport.send(['RL.REFUND', this.transport.serverKey(key), points]);
    if (r === null || r === undefined) return null;
    return { count: countOfProbe(r), resetAfterMs: Number(r[4]) };
  }

  /**
   * Adds `points` (≥ 1) to the count in force past any ceiling, keeping its window (RL.CHARGE).
   * Resolves to the count after it, or null when there was no count.
   */
  async charge(key, points) {
    const r = await this.transport.send(['RL.CHARGE', this.transport.serverKey(key), points]);
    if (r === null || r === undefined) return null;
    return { count: countOfProbe(r), resetAfterMs: Number(r[4]) };
  }

  /**
   * Carries over, once, the count a stock library left in a string at `stockKey` (INCR with a
   * TTL: rate-limiter-flexible's RateLimiterRedis, rate-limit-redis) onto the module's count at
   * `key`, whose window has just started: GET, then RL.CHARGE. Resolves to the count carried
   * (0 when there is no stock count; a key of another type is not a stock counter).
   */
  async carryOver(stockKey, key) {
    let count;
    try {
      count = Number.parseInt(await this.transport.send(['GET', stockKey], { readonly: true }), 10);
    } catch (err) {
      if (err && err.code === 'WRONGTYPE') return 0;
      throw err;
    }
    if (!Number.isInteger(count) || count <= 0) return 0;
    await this.charge(key, count);
    return count;
  }

  /** The count now and the time until it resets, or null: RL.PEEK (read-only). */
  async peek(key) {
    const r = await this.transport.send(['RL.PEEK', this.transport.serverKey(key)], { readonly: true });
    if (r === null || r === undefined) return null;
    return { count: countOfProbe(r), resetAfterMs: Number(r[4]) };
  }

  /**
   * The count, its window and time to expiry (RL.INFO: read-only). `never` is true when the
   * window is the ten-year one. Null when there is no count.
   */
  async info(key) {
    const r = await this.transport.send(['RL.INFO', this.transport.serverKey(key)], { readonly: true });
    if (r === null || r === undefined) return null;
    const f = infoFields(r);
    const periodMs = Number(f.period_ms);
    return { count: Number(f.used), periodMs, ttlMs: Number(f.ttl_ms), never: periodMs >= NEVER_MS };
  }

  /**
   * Deletes the count; resolves true if there was one. (DEL is a command ioredis knows: it applies
   * its keyPrefix itself, where the module commands above get it from transport.serverKey.)
   */
  async remove(key) {
    return Number(await this.transport.send(['DEL', key])) > 0;
  }
}

module.exports = { Counter, UNBOUNDED, CEILING_32, NEVER_MS, windowMs, ceilingFor };

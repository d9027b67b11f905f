'use strict';
/**
 * The counter the host libraries' stores keep (the store counts, the library decides), as one
 * module command each: a fixed window whose limit no count reaches,
 *
 *     RL.PERIOD key 1000000000000 <window ms> COST <points>
 *
 * admits every request, so the count is `1000000000000 − remaining`, the window starts at the
 * first count of a fresh key and the key expires by itself when it ends — INCRBY plus
 * PEXPIRE NX, atomically, without Lua. A window of ten years stands for "never expires".
 */
const { TEN_YEARS_MS } = require('./duration');
const { infoObject } = require('./commands');

/** A limit no counter reaches (the module's largest count). */
const UNBOUNDED = 1000000000000;
/** The period that stands for "never expires" (the module's longest). */
const NEVER_MS = TEN_YEARS_MS;

/** Window length to send: whole ms, or NEVER_MS for 0 / negative ("no expiry"). */
function windowMs(ms) {
  return ms > 0 ? Math.min(Math.ceil(ms), NEVER_MS) : NEVER_MS;
}

class Counter {
  /** @param {import('./transport').Transport} transport */
  constructor(transport) {
    this.transport = transport;
  }

  /**
   * Adds `points` (≥ 0) to the count at `key` in a window of `ms`; resolves to
   * `{count, resetAfterMs}` after it. `resetAfterMs` is 0 while nothing is counted.
   */
  async add(key, points, ms) {
    const args = ['RL.PERIOD', key, UNBOUNDED, windowMs(ms)];
    if (points !== 1) args.push('COST', points); // COST 1 is the default: fewer arguments to parse
    const r = await this.transport.send(args);
    return { count: UNBOUNDED - Number(r[2]), resetAfterMs: Number(r[4]) };
  }

  /**
   * Replaces whatever `key` holds by a fresh count of `points` in a window of `ms` (0: never
   * expires): RL.PERIOD … COST points FRESH. This is the one path that needs the module's FRESH
   * option (a count of 0 deletes the key).
   */
  async fresh(key, points, ms) {
    const r = await this.transport.send(['RL.PERIOD', key, UNBOUNDED, windowMs(ms), 'COST', points, 'FRESH']);
    return { count: UNBOUNDED - Number(r[2]), resetAfterMs: Number(r[4]) };
  }

  /**
   * Takes `points` (≥ 1) off the count (RL.REFUND; it stops at 0). Resolves to the count and
   * time to reset after it, or null when there was no count.
   */
  async subtract(key, points) {
    const r = await this.transport.send(['RL.REFUND', key, points]);
    if (r === null || r === undefined) return null;
    // The reply is what a DRYRUN COST 1 would get: remaining = UNBOUNDED − count − 1.
    return { count: UNBOUNDED - 1 - Number(r[2]), resetAfterMs: Number(r[4]) };
  }

  /** The count now and the time until it resets, or null: RL.PEEK (read-only). */
  async peek(key) {
    const r = await this.transport.send(['RL.PEEK', key], { readonly: true });
    if (r === null || r === undefined) return null;
    return { count: UNBOUNDED - 1 - Number(r[2]), resetAfterMs: Number(r[4]) };
  }

  /**
   * The count, its window and time to expiry (RL.INFO: read-only). `never` is true when the
   * window is the ten-year one. Null when there is no count.
   */
  async info(key) {
    const r = await this.transport.send(['RL.INFO', key], { readonly: true });
    if (r === null || r === undefined) return null;
    const f = infoObject(r);
    const periodMs = Number(f.period_ms);
    return { count: Number(f.used), periodMs, ttlMs: Number(f.ttl_ms), never: periodMs >= NEVER_MS };
  }

  /** Deletes the count; resolves true if there was one. */
  async remove(key) {
    return Number(await this.transport.send(['DEL', key])) > 0;
  }
}

module.exports = { Counter, UNBOUNDED, NEVER_MS, windowMs };

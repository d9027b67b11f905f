'use strict';
/**
 * PermitBlock: a hot key's permits taken from the server `size` at a time (one module call with
 * `COST size`), handed out locally one by one, and given back (RL.REFUND) when the block's
 * lifetime ends. A request is admitted only with a permit the server granted before it; the
 * price is permits held idle by this instance while another is refused (docs/clients.md
 * "Permit blocks").
 *
 * Terms:
 * - block: the permits one grant carried, with the instant they stop being usable (`expiresAt`,
 *   local monotonic ms) and the last instant they may still be refunded (`refundBy`).
 * - refill: the one call in flight per PermitBlock that takes the next block; concurrent callers
 *   await it rather than sending their own.
 */
const { performance } = require('node:perf_hooks');
const { toMs, toCount, show } = require('./duration');

/** Algorithms a block can carry: a grant can be used later and the unused part given back. */
const BLOCK_ALGORITHMS = ['token', 'period', 'leaky', 'throttle'];
const DEFAULT_LIFETIME_MS = 1000;
const DEFAULT_REFUND_GUARD_MS = 100;

function checkLimit(limit) {
  if (limit === null || typeof limit !== 'object') throw new TypeError(`limit must be an options object {algorithm, …} (got ${show(limit)})`);
  const a = limit.algorithm;
  if (a === 'slide') {
    throw new TypeError('a sliding window cannot carry permit blocks: the server dates a permit at its grant, and RL.REFUND takes back the newest entries (others\' use), so neither late use nor refunds stay exact');
  }
  if (!BLOCK_ALGORITHMS.includes(a)) throw new TypeError(`limit.algorithm must be one of ${BLOCK_ALGORITHMS.join(', ')} (got ${show(a)})`);
  if (a === 'leaky' && !limit.nodelay) throw new TypeError('a leaky bucket carries permit blocks only with nodelay: true (in delay mode each request has its own delay)');
  for (const k of ['cost', 'dryRun', 'wait', 'at', 'fresh', 'quantity', 'ban']) {
    // ban: a refused COST size (while single permits are left) would ban everybody
    if (limit[k] !== undefined && limit[k] !== null && limit[k] !== false) throw new TypeError(`limit.${k} is not allowed: the block sets the cost, sends each grant now and bans no one`);
  }
  return a;
}

class PermitBlock {
  /**
   * @param {import('./client').RateLimit} rateLimit  the package's client
   * @param {string|Buffer} key  the (hot) key every instance shares
   * @param {object} limit  `{algorithm: 'token'|'period'|'leaky'|'throttle', …its parameters}` as for
   *   RateLimit#limit / #throttle (leaky: `nodelay: true`)
   * @param {{size: number, lifetime?: number|string, refillBelow?: number, refundGuard?: number|string}} opts
   *   size: permits per grant; lifetime: a block's longest life (default 1 s); refillBelow: start
   *   the next grant in the background when this many permits or fewer are left (default 0: only
   *   when empty); refundGuard: a fixed window's unused permits are refunded only this long
   *   before the window's end, else dropped (default 100 ms)
   */
  constructor(rateLimit, key, limit, opts) {
    if (!rateLimit || typeof rateLimit.limit !== 'function' || typeof rateLimit.refund !== 'function') {
      throw new TypeError(`PermitBlock needs the package's RateLimit client (got ${show(rateLimit)})`);
    }
    this.algorithm = checkLimit(limit);
    if (opts === null || typeof opts !== 'object') throw new TypeError(`PermitBlock needs options {size, …} (got ${show(opts)})`);
    this.rateLimit = rateLimit;
    this.key = key;
    this.limit = { ...limit };
    this.size = toCount(opts.size, 'size');
    if (this.size < 1) throw new TypeError('size must be at least 1');
    if (this.algorithm === 'throttle') {
      const most = toCount(limit.maxBurst, 'maxBurst') + 1;
      if (this.size > most) throw new TypeError(`size must be at most maxBurst + 1 = ${most} for a GCRA limit: CL.THROTTLE refuses a larger quantity whatever the state`);
    }
    this.lifetimeMs = opts.lifetime === undefined ? DEFAULT_LIFETIME_MS : toMs(opts.lifetime, 'lifetime');
    if (this.lifetimeMs < 1) throw new TypeError('lifetime must be at least 1 ms');
    this.refillBelow = opts.refillBelow === undefined ? 0 : toCount(opts.refillBelow, 'refillBelow');
    if (this.refillBelow >= this.size) throw new TypeError('refillBelow must be less than size');
    this.refundGuardMs = opts.refundGuard === undefined ? DEFAULT_REFUND_GUARD_MS : toMs(opts.refundGuard, 'refundGuard');
    /** blocks in grant order: {left, expiresAt, refundBy, timer} */
    this.blocks = [];
    this.refill = null;
    this.closed = false;
    /** counters: calls (grant requests sent), refunds (RL.REFUND sent), grants (calls that granted), and permits granted, used, refunded, dropped */
    this.stats = { calls: 0, refunds: 0, grants: 0, granted: 0, used: 0, refunded: 0, dropped: 0 };
  }

  /** Permits held now (unexpired). */
  get held() {
    const now = performance.now();
    return this.blocks.reduce((n, b) => n + (b.expiresAt > now ? b.left : 0), 0);
  }

  /**
   * One decision: a held permit if there is one, else the (single, shared) refill's grant.
   * Resolves to `{allowed, limit, remaining, retryAfterMs, resetAfterMs}`, `remaining` being the
   * permits this instance still holds; a refusal carries the server's retryAfterMs.
   */
  async take() {
    for (;;) {
      if (this.closed) throw new Error('PermitBlock is closed');
      const d = this._handOut();
      if (d) return d;
      const refused = await (this.refill || this._startRefill());
      if (refused) return refused;
    }
  }

  _handOut() {
    const now = performance.now();
    this.blocks = this.blocks.filter((x) => x.left > 0 || (clearTimeout(x.timer), false));
    const b = this.blocks.find((x) => x.expiresAt > now); // an expired one waits for its timer: never used
    if (!b) return null;
    b.left -= 1;
    this.stats.used += 1;
    const held = this.blocks.reduce((n, x) => n + (x.expiresAt > now ? x.left : 0), 0);
    if (this.refillBelow > 0 && held <= this.refillBelow && !this.refill) this._startRefill().catch(() => {});
    return { allowed: true, limit: this.lastLimit, remaining: held, retryAfterMs: 0, resetAfterMs: Math.max(0, Math.ceil(b.expiresAt - now)) };
  }

  /** The refill: resolves to null (a block was added) or the refusal; one at a time. */
  _startRefill() {
    const p = this._grant().finally(() => {
      if (this.refill === p) this.refill = null;
    });
    this.refill = p;
    return p;
  }

  async _ask(cost) {
    this.stats.calls += 1;
    if (this.algorithm === 'throttle') return this.rateLimit.throttle(this.key, { ...this.limit, quantity: cost });
    return this.rateLimit.limit(this.key, { ...this.limit, cost });
  }

  async _grant() {
    let sentAt = performance.now();
    let cost = this.size;
    let d = await this._ask(cost);
    if (!d.allowed && cost > 1) {
      // the one fallback: what the server says is left (at least 1, to learn a single permit's fate)
      cost = Math.max(1, Math.min(d.remaining, cost - 1));
      sentAt = performance.now();
      d = await this._ask(cost);
    }
    this.lastLimit = d.limit;
    if (!d.allowed) return { allowed: false, limit: d.limit, remaining: 0, retryAfterMs: d.retryAfterMs, resetAfterMs: d.resetAfterMs };
    this.stats.grants += 1;
    this.stats.granted += cost;
    this._addBlock(cost, sentAt, d.resetAfterMs);
    if (this.closed) await this._settleAll();
    return null;
  }

  _addBlock(count, sentAt, resetAfterMs) {
    const now = performance.now();
    let expiresAt = sentAt + this.lifetimeMs;
    let refundBy = Infinity;
    let settleAt = expiresAt;
    if (this.algorithm === 'period') {
      // The window ends no earlier than windowEnd (the server judged after we sent): permits are
      // used only before it, and refunded only while a refund surely lands in it — settled at
      // windowEnd − guard, sent no later than windowEnd − guard/2 (the other half is for timer
      // lateness), else dropped.
      const windowEnd = sentAt + resetAfterMs;
      expiresAt = Math.min(expiresAt, windowEnd);
      refundBy = windowEnd - this.refundGuardMs / 2;
      const settleBefore = windowEnd - this.refundGuardMs;
      settleAt = settleBefore > now ? Math.min(expiresAt, settleBefore) : expiresAt;
    }
    const b = { left: count, expiresAt, refundBy, timer: null };
    b.timer = setTimeout(() => this._settle(b).catch((e) => this._onError(e)), Math.max(0, settleAt - now));
    if (typeof b.timer.unref === 'function') b.timer.unref();
    this.blocks.push(b);
  }

  _onError(e) {
    this.lastError = e;
    if (typeof this.onError === 'function') this.onError(e);
  }

  /** Ends block `b`: its unused permits go back (RL.REFUND), or are dropped past a window's refundBy. */
  async _settle(b) {
    clearTimeout(b.timer);
    const i = this.blocks.indexOf(b);
    if (i >= 0) this.blocks.splice(i, 1);
    const n = b.left;
    b.left = 0;
    if (n === 0) return;
    if (performance.now() > b.refundBy) {
      this.stats.dropped += n;
      return;
    }
    this.stats.refunded += n;
    this.stats.refunds += 1;
    await this.rateLimit.refund(this.key, n);
  }

  async _settleAll() {
    await Promise.all(this.blocks.slice().map((b) => this._settle(b)));
  }

  /** Stops handing out permits and gives the unused ones back (awaiting a refill in flight). */
  async close() {
    this.closed = true;
    if (this.refill) await this.refill.catch(() => {});
    await this._settleAll();
  }
}

module.exports = { PermitBlock, BLOCK_ALGORITHMS };

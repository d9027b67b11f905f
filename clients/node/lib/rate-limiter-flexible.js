'use strict';
/**
 * rate-limiter-flexible on the module.
 *
 * - RateLimiterRedisModule: the RateLimiterRedis contract (consume, penalty, reward, block, get,
 *   set, delete, blockDuration, inMemoryBlockOnConsumed, insuranceLimiter, execEvenly,
 *   keyPrefix, rejectIfRedisNotReady …). It extends the library's own RateLimiterStoreAbstract
 *   (the host's copy, a peer dependency) and replaces only the store calls: each is one module
 *   command on the unbounded counter (see counter.js) instead of the stock Lua script or MULTI.
 * - RateLimiterUnionModule: several limiters, all or nothing, in one RL.ALL (the stock union
 *   consumes each limiter separately and charges the others for a request one refuses).
 * - RateLimiterQueueModule: a FIFO queue of requests waiting for tokens, kept by the server
 *   (RL.PERIOD … WAIT), instead of timers in one process.
 *
 * Keys: the module's counter for `keyPrefix:key` lives at `keyPrefix:rl:key` (`rl:key` without a
 * keyPrefix; the Go drop-ins' layout), never at the stock key, which holds a string the stock RateLimiterRedis counts with: a service
 * switched on a live Redis (stock instances still running beside it during a rollout, or their
 * keys not yet expired) never meets a key of the other type (no WRONGTYPE on either side). When
 * a window starts, the stock key's standing is read once (GET and PTTL) and carried over
 * (RL.CHARGE), so the count on the switch is the stock count plus the new requests
 * (`migrateFromStock: false` turns the read off once no stock key can be left).
 */
const { Transport } = require('./transport');
const { Counter, NEVER_MS, ceilingFor } = require('./counter');
const { limitArgs } = require('./commands');
const { toMs } = require('./duration');
const { missingPeerMessage } = require('./peer');

function host(path) {
  try {
    return require(`rate-limiter-flexible/lib/${path}`);
  } catch (err) {
    throw Object.assign(new Error(missingPeerMessage('rate-limiter-flexible', err)), { code: 'ERR_PEER_MISSING', peerCause: err });
  }
}

const RateLimiterStoreAbstract = host('RateLimiterStoreAbstract');
const RateLimiterAbstract = host('RateLimiterAbstract');
const RateLimiterRes = host('RateLimiterRes');

/** What marks the module's counter beside a stock key: `keyPrefix:rl:key`, never the stock key. */
const MODULE_KEY_MARK = 'rl:';

function checkPoints(points) {
  if (typeof points === 'string') {
    if (!/^[1-9][0-9]*$/.test(points)) {
      throw new Error('Consuming string different than integer values is not supported by this package');
    }
    return Number(points);
  }
  if (!Number.isInteger(points)) {
    throw new Error('Consuming decimal number of points is not supported by this package');
  }
  return points;
}

/** ms before the count resets, as the library reports it: -1 for a window that never ends. */
function msBefore(never, resetAfterMs, windowMs) {
  if (never) return -1;
  return resetAfterMs > 0 ? resetAfterMs : windowMs;
}

class RateLimiterRedisModule extends RateLimiterStoreAbstract {
  /**
   * @param {object} opts  RateLimiterRedis options: storeClient (ioredis Redis/Cluster or
   *   node-redis client/cluster), points, duration, keyPrefix, blockDuration, … . The stock
   *   `customIncrTtlLuaScript` is not supported (no Lua): setting it is ignored.
   */
  constructor(opts) {
    super(opts);
    this.client = opts.storeClient;
    this._rejectIfRedisNotReady = !!opts.rejectIfRedisNotReady;
    this.useRedisPackage = !!opts.useRedisPackage || (this.client && this.client.constructor && this.client.constructor.name === 'Commander');
    this._counterStore = null; // built on first use: a client that is not ready must not be touched here
    this._migrateFromStock = opts.migrateFromStock !== false;
  }

  /** The module's counter for the stock key `rlKey` (getKey's `keyPrefix:key`): `keyPrefix:rl:key`. */
  _moduleKey(rlKey) {
    const head = this.keyPrefix ? `${this.keyPrefix}:` : '';
    return head + MODULE_KEY_MARK + String(rlKey).slice(head.length);
  }

  /** The counter's ceiling: above every threshold consumed points are compared with. */
  _ceiling() {
    return ceilingFor(Math.max(this.points, this.blockOnConsumed || 0, this.inMemoryBlockOnConsumed || 0));
  }

  get _counter() {
    if (!this._counterStore) this._counterStore = new Counter(Transport.of(this.client));
    return this._counterStore;
  }

  /** The stock class's readiness check (ioredis status, node-redis isReady, cluster slots). */
  _isRedisReady(rlKey, isReadonly) {
    if (!this._rejectIfRedisNotReady) return true;
    const c = this.client;
    if (c.status) return c.status === 'ready';
    if (typeof c.isReady === 'function') return c.isReady();
    if (typeof c.isReady === 'boolean') return c.isReady === true;
    if (c._slots && typeof c._slots.getClient === 'function') {
      if (typeof c.isOpen === 'boolean' && c.isOpen !== true) return false;
      try {
        const slotClient = c._slots.getClient(rlKey, isReadonly);
        return !!slotClient && slotClient.isReady === true;
      } catch {
        return false;
      }
    }
    return true;
  }

  _getRateLimiterRes(rlKey, changedPoints, result) {
    const res = new RateLimiterRes();
    res.consumedPoints = result.consumed;
    res.isFirstInDuration = res.consumedPoints === changedPoints;
    res.remainingPoints = Math.max(this.points - res.consumedPoints, 0);
    res.msBeforeNext = result.msBeforeNext;
    return res;
  }

  /**
   * One command per store call:
   * - consume / penalty (points ≥ 0): RL.PERIOD key <ceiling> <duration> COST points KEEPPERIOD
   *   (the duration, a customDuration included, starts a new window only: the stock script
   *   sets the TTL when it creates the key, so a window in force keeps its end)
   * - reward (points < 0): RL.REFUND key −points (stops at 0: no negative counts)
   * - block / set (forceExpire): RL.PERIOD key <ceiling> <duration> COST points FRESH (the
   *   duration is the new window by definition)
   * A duration of 0 is the ten-year window, reported as msBeforeNext −1 ("never expires").
   */
  _upsert(rlKey, points, msDuration, forceExpire = false) {
    let n;
    try {
      n = checkPoints(points);
      if (!this._isRedisReady(rlKey, false)) throw new Error('Redis connection is not ready');
    } catch (err) {
      return Promise.reject(err);
    }
    const secDuration = Math.floor(msDuration / 1000);
    const windowMs = secDuration > 0 ? secDuration * 1000 : 0;
    const never = windowMs === 0;
    const counter = this._counter;
    const counted = (r) => ({ consumed: r.count, msBeforeNext: msBefore(never, r.resetAfterMs, windowMs) });
    const key = this._moduleKey(rlKey);
    if (forceExpire) {
      return counter.fresh(key, Math.max(n, 0), windowMs).then((r) => ({ consumed: r.count, msBeforeNext: never ? -1 : windowMs }));
    }
    if (n < 0) {
      return counter.subtract(key, -n).then((r) => (r ? counted(r) : { consumed: 0, msBeforeNext: never ? -1 : 0 }));
    }
    // consume / penalty (n ≥ 0): the hot path, one promise chain; a window that starts with this
    // call carries over what a stock key left
    const added = counter.add(key, n, windowMs, this._ceiling(), true);
    if (!this._migrateFromStock) return added.then(counted);
    return added.then(async (r) => {
      if (r.count !== n || n === 0) return counted(r);
      const carried = await counter.carryOver(rlKey, key);
      return counted({ ...r, count: r.count + carried });
    });
  }

  /** get(): RL.INFO (read-only) — the count and its time to expiry (−1 for "never"). */
  async _get(rlKey) {
    if (!this._isRedisReady(rlKey, true)) throw new Error('Redis connection is not ready');
    const r = await this._counter.info(this._moduleKey(rlKey));
    if (!r) return null;
    return { consumed: r.count, msBeforeNext: r.never ? -1 : r.ttlMs };
  }

  /** delete(): DEL of the module's key (and of a stock key left at the stock name). */
  async _delete(rlKey) {
    const [deleted] = await Promise.all([this._counter.remove(this._moduleKey(rlKey)), this._migrateFromStock ? this._counter.remove(rlKey) : false]);
    return deleted;
  }
}

/** Duration option (seconds, 0 = never) of a limiter as module ms. */
function limiterWindowMs(limiter) {
  return limiter.duration > 0 ? limiter.duration * 1000 : NEVER_MS;
}

class RateLimiterUnionModule {
  /**
   * Several RateLimiterRedisModule limiters checked together, all or nothing, in one RL.ALL.
   * Each limiter keeps its own key (its keyPrefix) and limit (its points per duration). On a
   * cluster the keys of one call must share a slot: put a hash tag in the key (`{user42}`).
   * @param {...RateLimiterRedisModule} limiters  at least one; all on the same client
   */
  constructor(...limiters) {
    if (limiters.length < 1) throw new Error('RateLimiterUnionModule: give at least one limiter');
    for (const l of limiters) {
      if (!(l instanceof RateLimiterRedisModule)) throw new Error('RateLimiterUnionModule: limiters must be RateLimiterRedisModule instances');
    }
    const prefixes = new Set(limiters.map((l) => l.keyPrefix));
    if (prefixes.size !== limiters.length) throw new Error('RateLimiterUnionModule: limiters must have different keyPrefix');
    this._limiters = limiters;
  }

  /**
   * Consumes `points` from every limiter, or from none. Resolves to `{[keyPrefix]: RateLimiterRes}`;
   * rejects with the same shape holding the limiters that refused (an Error on a server error).
   */
  async consume(key, points = 1) {
    const n = checkPoints(points);
    const limiters = this._limiters;
    const transport = Transport.of(limiters[0].client);
    const keys = limiters.map((l) => transport.serverKey(l._moduleKey(l.getKey(key))));
    const groups = [];
    for (const l of limiters) groups.push('PERIOD', ...limitArgs('period', { limit: l.points, period: limiterWindowMs(l), cost: n }));
    const reply = await transport.send(['RL.ALL', keys.length, ...keys, ...groups], { keyIndex: 2 });
    const allowed = Number(reply[0]) === 1;
    const out = {};
    reply[6].forEach((d, i) => {
      const l = limiters[i];
      const ok = Number(d[0]) === 1;
      const remaining = Number(d[2]);
      const res = new RateLimiterRes();
      res.remainingPoints = remaining;
      res.consumedPoints = l.points - remaining + (ok ? 0 : n);
      res.msBeforeNext = l.duration > 0 ? (ok ? Number(d[4]) : Number(d[3])) : -1;
      res.isFirstInDuration = ok && res.consumedPoints === n;
      if (allowed || !ok) out[l.keyPrefix] = res;
    });
    if (!allowed) throw out;
    return out;
  }
}

let RateLimiterQueueError;
function queueError(message) {
  if (!RateLimiterQueueError) RateLimiterQueueError = host('component/RateLimiterQueueError');
  return new RateLimiterQueueError(message);
}

class RateLimiterQueueModule {
  /**
   * Requests wait for tokens in a first-come-first-served queue that the server keeps per key
   * (RL.PERIOD key points duration COST tokens WAIT timeout): fair across every process, no
   * polling. The waits hold a connection, so the queue uses its own: `opts.client`, or a
   * duplicate of the limiter's client.
   * @param {RateLimiterRedisModule} limiter  its points per duration are the queue's rate
   * @param {{maxQueueSize?: number, timeoutMs?: number|string, client?: object}} [opts]
   *   maxQueueSize: waiting requests per key in this process (default 4294967295);
   *   timeoutMs: how long a request may wait (default 0 = without limit)
   */
  constructor(limiter, opts = {}) {
    if (!(limiter instanceof RateLimiterRedisModule)) throw new Error('RateLimiterQueueModule: the limiter must be a RateLimiterRedisModule');
    this._limiter = limiter;
    this._maxQueueSize = opts.maxQueueSize === undefined ? 4294967295 : opts.maxQueueSize;
    this._timeout = opts.timeoutMs === undefined ? 0 : opts.timeoutMs;
    this._ownClient = !opts.client;
    this._client = opts.client || null;
    this._ready = null;
    this._waiting = new Map();
  }

  _connection() {
    if (!this._ready) {
      this._ready = (async () => {
        if (!this._client) {
          const dup = this._limiter.client.duplicate();
          if (typeof dup.connect === 'function' && typeof dup.call !== 'function' && dup.isOpen === false) await dup.connect();
          this._client = dup;
        }
        return Transport.of(this._client);
      })();
    }
    return this._ready;
  }

  /** Tokens left in the current interval for `key` (RL.PEEK, read-only). */
  async getTokensRemaining(key = 'limiter') {
    const t = await this._connection();
    const l = this._limiter;
    const r = await t.send(['RL.PEEK', t.serverKey(l._moduleKey(l.getKey(key)))], { readonly: true });
    if (r === null || r === undefined) return l.points;
    // RL.PEEK answers as a DRYRUN COST 1 would: an admitted one has taken its token off `remaining`.
    return Number(r[0]) === 1 ? Number(r[2]) + 1 : Number(r[2]);
  }

  /**
   * Waits in the server's queue until `tokens` can be taken from `key`'s interval; resolves to
   * the tokens left. Rejects with RateLimiterQueueError when more tokens than the limiter's
   * points are asked for, when this process already has maxQueueSize requests waiting on the
   * key, or when the wait times out.
   */
  async removeTokens(tokens = 1, key = 'limiter') {
    const l = this._limiter;
    const n = checkPoints(tokens);
    if (n > l.points) throw queueError(`Requested tokens ${n} exceeds maximum ${l.points} tokens per interval`);
    const waiting = this._waiting.get(key) || 0;
    if (waiting >= this._maxQueueSize) throw queueError(`Number of requests reached it's maximum ${this._maxQueueSize}`);
    this._waiting.set(key, waiting + 1);
    try {
      const t = await this._connection();
      const args = ['RL.PERIOD', t.serverKey(l._moduleKey(l.getKey(key))), ...limitArgs('period', { limit: l.points, period: limiterWindowMs(l), cost: n }), 'WAIT', toMs(this._timeout, 'timeoutMs')];
      const r = await t.send(args);
      if (Number(r[0]) !== 1) throw queueError(`Waited for ${n} tokens and timed out (retry after ${Number(r[3])} ms)`);
      return Number(r[2]);
    } finally {
      const left = (this._waiting.get(key) || 1) - 1;
      if (left === 0) this._waiting.delete(key);
      else this._waiting.set(key, left);
    }
  }

  /** Closes the queue's own connection (when it made one). */
  async close() {
    if (this._ownClient && this._client) {
      const c = this._client;
      this._client = null;
      this._ready = null;
      if (typeof c.quit === 'function') await c.quit();
    }
  }
}

module.exports = { RateLimiterRedisModule, RateLimiterUnionModule, RateLimiterQueueModule, RateLimiterAbstract };

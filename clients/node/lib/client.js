'use strict';
/**
 * RateLimit: the module's commands as typed methods. Each method sends exactly one command
 * (one round trip) and resolves to the decision the server made.
 */
const { Transport } = require('./transport');
const { toMs, toCount } = require('./duration');
const { ALGORITHMS, COMMAND_OF, flag, options, limitArgs, callOptions, decision, infoObject } = require('./commands');
const { show } = require('./duration');

/** A policy name: a non-empty string. */
function policyName(name) {
  if (typeof name !== 'string' || name === '') throw new TypeError(`policy name must be a non-empty string (got ${show(name)})`);
  return name;
}

class RateLimit {
  /**
   * @param {object|Function} client  ioredis Redis/Cluster, node-redis client/cluster, or sendCommand(...args)
   * @param {{prefix?: string}} [options]  prefix: prepended to every key this instance sends
   */
  constructor(client, options = {}) {
    this.transport = Transport.of(client);
    this.prefix = options.prefix || '';
  }

  _key(key) {
    if (key === undefined || key === null || key === '' || (typeof key !== 'string' && !Buffer.isBuffer(key))) {
      throw new TypeError(`key must be a non-empty string or Buffer (got ${show(key)})`);
    }
    const k = this.prefix ? (Buffer.isBuffer(key) ? Buffer.concat([Buffer.from(this.prefix), key]) : this.prefix + key) : key;
    return this.transport.serverKey(k);
  }

  async _limit(algorithm, key, opts) {
    const args = [COMMAND_OF[algorithm], this._key(key), ...limitArgs(algorithm, opts), ...callOptions(opts)];
    return decision(await this.transport.send(args));
  }

  /** Token bucket: RL.TOKEN key capacity rate period [COST] [STEP] [BAN] [WAIT] [DRYRUN] [AT]. */
  async token(key, opts) {
    return this._limit('token', key, opts);
  }

  /** Fixed window: RL.PERIOD key limit period [COST] [ALIGN [offset]] [BAN] [WAIT] [DRYRUN] [AT]. */
  async period(key, opts) {
    return this._limit('period', key, opts);
  }

  /** Sliding window: RL.SLIDE key limit window [COST] [BUCKETS b] [BAN] [WAIT] [DRYRUN] [AT]. */
  async slide(key, opts) {
    return this._limit('slide', key, opts);
  }

  /** Leaky bucket: RL.LEAKY key capacity rate period [COST] [NODELAY | DELAY d] [BAN] [WAIT] [DRYRUN] [AT]. */
  async leaky(key, opts) {
    return this._limit('leaky', key, opts);
  }

  /**
   * Any of the four algorithms by name (`{algorithm: 'token', capacity, rate, period}` …).
   */
  async limit(key, opts) {
    if (!ALGORITHMS.includes(opts && opts.algorithm)) {
      throw new TypeError(`algorithm must be one of ${ALGORITHMS.join(', ')} (got ${show(opts && opts.algorithm)})`);
    }
    return this._limit(opts.algorithm, key, opts);
  }

  /**
   * GCRA, redis-cell compatible: CL.THROTTLE key maxBurst count period [quantity]. The period is
   * whole seconds (a duration that is a multiple of 1 s). Reply times are the module's whole
   * seconds converted to ms; retryAfterMs is 0 when allowed.
   */
  async throttle(key, opts) {
    options(opts, 'throttle', '{maxBurst, count, period}');
    const periodMs = toMs(opts.period, 'period');
    if (periodMs % 1000 !== 0 || periodMs === 0) throw new TypeError('period of throttle must be a whole number of seconds');
    const args = ['CL.THROTTLE', this._key(key), toCount(opts.maxBurst, 'maxBurst'), toCount(opts.count, 'count'), periodMs / 1000];
    if (opts.quantity !== undefined && opts.quantity !== null) args.push(toCount(opts.quantity, 'quantity'));
    args.push(...callOptions(opts, { ban: false, wait: false, fresh: false }));
    const r = await this.transport.send(args);
    const allowed = Number(r[0]) === 0;
    const retryS = Number(r[3]);
    return {
      allowed,
      limit: Number(r[1]),
      remaining: Number(r[2]),
      retryAfterMs: allowed ? 0 : retryS < 0 ? -1 : retryS * 1000,
      resetAfterMs: Number(r[4]) * 1000,
    };
  }

  /**
   * Several limits, all or nothing: RL.ALL. `limits` is a list of `{key, algorithm, …options}`
   * or `{key, policy, cost?}` (a server policy's limit);
   * on a cluster every key must hash to one slot (use a hash tag: `{user42}:s`, `{user42}:d`).
   * Resolves to the binding limit's decision plus `index` (0-based, into `limits`) and `details`
   * (one decision per limit).
   */
  async all(limits, opts = {}) {
    if (!Array.isArray(limits) || limits.length === 0) throw new TypeError(`all() needs a non-empty list of limits (got ${show(limits)})`);
    for (const l of limits) options(l, 'each limit of all()', '{key, algorithm, …}');
    const keys = limits.map((l) => this._key(l.key));
    const groups = [];
    for (const l of limits) {
      if (l.policy !== undefined && l.algorithm === undefined) {
        // a server policy's limit in place of a limit: POLICY name [COST n]
        groups.push('POLICY', policyName(l.policy));
        if (l.cost !== undefined && l.cost !== null) groups.push('COST', toCount(l.cost, 'cost'));
        continue;
      }
      if (!ALGORITHMS.includes(l.algorithm)) throw new TypeError(`each limit needs algorithm (${ALGORITHMS.join(', ')}) or policy (got ${show(l.algorithm)})`);
      groups.push(l.algorithm.toUpperCase(), ...limitArgs(l.algorithm, l));
    }
    const args = ['RL.ALL', keys.length, ...keys, ...groups, ...callOptions(opts, { ban: false, wait: false, fresh: false })];
    const r = await this.transport.send(args, { keyIndex: 2 });
    const d = decision(r);
    return { ...d, index: Number(r[5]) - 1, details: r[6].map(decision) };
  }

  /** Gives `count` permits back: RL.REFUND. Resolves to the standing after it, or null (nothing to refund). */
  async refund(key, count, opts = {}) {
    const args = ['RL.REFUND', this._key(key), toCount(count, 'count'), ...callOptions(opts, { ban: false, wait: false, fresh: false, deadline: false })];
    const r = await this.transport.send(args);
    return r === null || r === undefined ? null : decision(r);
  }

  /**
   * Bills an overrun past the limit: RL.CHARGE. Takes `count` permits whatever the limit (a debt
   * later requests wait out; not sliding windows). Resolves to the
   * standing after it, or null (nothing live to charge: nothing is created).
   */
  async charge(key, count, opts = {}) {
    const args = ['RL.CHARGE', this._key(key), toCount(count, 'count'), ...callOptions(opts, { ban: false, wait: false, fresh: false, deadline: false })];
    const r = await this.transport.send(args);
    return r === null || r === undefined ? null : decision(r);
  }

  /**
   * Takes a lease: RL.ACQUIRE key limit lease [ID] [WAIT] [DRYRUN] [AT]. Resolves to the decision
   * plus `id` (null when refused or under dryRun).
   */
  async acquire(key, opts) {
    options(opts, 'acquire', '{limit, lease}');
    const args = ['RL.ACQUIRE', this._key(key), toCount(opts.limit, 'limit'), toMs(opts.lease, 'lease')];
    if (opts.id !== undefined && opts.id !== null) args.push('ID', opts.id);
    args.push(...callOptions(opts, { ban: false, fresh: false }));
    const r = await this.transport.send(args);
    const d = decision(r);
    const id = r[5];
    return { ...d, id: id === null || id === undefined ? null : Buffer.isBuffer(id) ? id.toString() : String(id) };
  }

  /** Gives a lease back: RL.RELEASE. Resolves to true if it was held. */
  async release(key, id, opts = {}) {
    const args = ['RL.RELEASE', this._key(key), id, ...callOptions(opts, { ban: false, wait: false, fresh: false, deadline: false })];
    return Number(await this.transport.send(args)) === 1;
  }

  /** The standing now (what a DRYRUN COST 1 would get), or null if the key holds no limiter. */
  async peek(key) {
    const r = await this.transport.send(['RL.PEEK', this._key(key)], { readonly: true });
    return r === null || r === undefined ? null : decision(r);
  }

  // ---- policies: limits the server holds (RL.POLICY, RL.HIT) --------------------------------

  /**
   * Judges `key` under the server's policy `policy` (or the key's override): RL.HIT policy key
   * [COST n] [DRYRUN] [AT ms] [WAIT t]. Same decision as the direct command with the policy's
   * parameters; an unknown policy is a server error naming it.
   */
  async hit(policy, key, opts = {}) {
    const args = ['RL.HIT', policyName(policy), this._key(key)];
    if (opts && opts.cost !== undefined && opts.cost !== null) args.push('COST', toCount(opts.cost, 'cost'));
    args.push(...callOptions(opts, { ban: false, fresh: false }));
    return decision(await this.transport.send(args, { keyIndex: 2 }));
  }

  /**
   * Defines (replaces) policy `name`: RL.POLICY SET name <ALGORITHM params…> [BAN d [CLEAR]]
   * [SHADOW] [FOR key]. `limit` is `{algorithm, …its parameters}` as for limit(). On a cluster client it
   * is written to every primary (each node holds its own table).
   * @param {{for?: string|Buffer, ban?: number|string, clear?: boolean, shadow?: boolean}} [opts]
   */
  async setPolicy(name, limit, opts = {}) {
    options(limit, 'setPolicy', '{algorithm, …its parameters}');
    if (!ALGORITHMS.includes(limit.algorithm)) throw new TypeError(`algorithm must be one of ${ALGORITHMS.join(', ')} (got ${show(limit.algorithm)})`);
    if (limit.cost !== undefined) throw new TypeError('a policy has no cost: give cost to hit()');
    const args = ['RL.POLICY', 'SET', policyName(name), limit.algorithm.toUpperCase(), ...limitArgs(limit.algorithm, limit)];
    const o = opts || {};
    // Checked before anything is sent: a policy is replaced whole, so a misread option would
    // silently change a live limit.
    const clear = flag(o.clear, 'clear');
    const shadow = flag(o.shadow, 'shadow');
    if (o.ban !== undefined && o.ban !== null) {
      args.push('BAN', toMs(o.ban, 'ban'));
      if (clear) args.push('CLEAR');
    } else if (clear) {
      throw new TypeError('clear needs ban (BAN d CLEAR)');
    }
    if (shadow) args.push('SHADOW');
    if (o.for !== undefined && o.for !== null) args.push('FOR', this._key(o.for));
    await this.transport.sendToPrimaries(args);
  }

  /** Policy `name` (or its override for `opts.for`) as an object in camelCase, or null. */
  async getPolicy(name, opts = {}) {
    const args = ['RL.POLICY', 'GET', policyName(name)];
    if (opts && opts.for !== undefined && opts.for !== null) args.push('FOR', this._key(opts.for));
    const [first] = await this.transport.sendToPrimaries(args);
    return infoObject(first);
  }

  /**
   * Deletes policy `name` with all its overrides, or only the override for `opts.for`; on a
   * cluster client on every primary. Resolves true if it existed (on any primary).
   */
  async deletePolicy(name, opts = {}) {
    const args = ['RL.POLICY', 'DEL', policyName(name)];
    if (opts && opts.for !== undefined && opts.for !== null) args.push('FOR', this._key(opts.for));
    return (await this.transport.sendToPrimaries(args)).some((r) => Number(r) === 1);
  }

  /** The names of the policies (on a cluster client: of every primary, each once), sorted. */
  async policies() {
    const replies = await this.transport.sendToPrimaries(['RL.POLICY', 'LIST']);
    const names = new Set();
    for (const r of replies) for (const n of r || []) names.add(Buffer.isBuffer(n) ? n.toString() : String(n));
    return [...names].sort();
  }

  /**
   * Policy `name`'s counters (RL.POLICY STATS) in camelCase: calls, admitted, limited,
   * shadowLimited, nearLimit … On a cluster client, summed over the primaries (each counts the
   * calls it served).
   */
  async policyStats(name) {
    const replies = await this.transport.sendToPrimaries(['RL.POLICY', 'STATS', policyName(name)]);
    const sum = {};
    for (const r of replies) {
      const fields = infoObject(r) || {};
      for (const [k, v] of Object.entries(fields)) sum[k] = typeof v === 'number' ? (sum[k] || 0) + v : v;
    }
    return sum;
  }

  /** Zeroes every policy's counters (RL.POLICY RESETSTAT), on every primary of a cluster client. */
  async resetPolicyStats() {
    await this.transport.sendToPrimaries(['RL.POLICY', 'RESETSTAT']);
  }

  /**
   * The stored parameters and state (RL.INFO) as an object, or null. The server's snake_case
   * fields in camelCase (`updated_ms` → `updatedMs`, `ttl_ms` → `ttlMs`); numbers as numbers.
   */
  async info(key) {
    return infoObject(await this.transport.send(['RL.INFO', this._key(key)], { readonly: true }));
  }
}

module.exports = { RateLimit };

'use strict';
/**
 * Builds the module's command arguments from option objects, and reads its replies.
 * Pure functions: no I/O here.
 */
const { toMs, toCount, show } = require('./duration');

const ALGORITHMS = ['token', 'period', 'slide', 'leaky'];
const COMMAND_OF = { token: 'RL.TOKEN', period: 'RL.PERIOD', slide: 'RL.SLIDE', leaky: 'RL.LEAKY' };

function required(opts, name, alias) {
  const v = opts[name] !== undefined ? opts[name] : alias !== undefined ? opts[alias] : undefined;
  if (v === undefined || v === null) throw new TypeError(`option ${name} is required (got ${show(v)})`);
  return v;
}

/**
 * A yes/no option: true or false (undefined and null: false). Anything else — 'yes', 1, 'false'
 * — is a TypeError, not a truthy guess: `shadow: 'no'` must not make a live policy a shadow one.
 * @param {unknown} value
 * @param {string} name
 * @returns {boolean}
 */
function flag(value, name) {
  if (value === undefined || value === null || value === false) return false;
  if (value === true) return true;
  throw new TypeError(`option ${name} must be true or false (got ${show(value)})`);
}

/** The parameters each algorithm needs, for the message when no options object is given. */
const NEEDS = { token: '{capacity, rate, period}', period: '{limit, period}', slide: '{limit, window}', leaky: '{capacity, rate, period}' };

/** `o` when it is an options object; else a TypeError naming what `what` needs. */
function options(o, what, needs) {
  if (o === null || typeof o !== 'object') throw new TypeError(`${what} needs an options object ${needs} (got ${show(o)})`);
  return o;
}

/** A signed UTC offset for ALIGN: ms (may be negative) or "8h", "+8h", "-5h". */
function toOffsetMs(value) {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return value;
  if (typeof value === 'string') {
    const m = /^\s*([+-]?)(.+)$/.exec(value);
    if (m) {
      const ms = toMs(m[2], 'align');
      return m[1] === '-' ? -ms : ms;
    }
  }
  throw new TypeError(`align must be true or a UTC offset like "8h", "-5h" or a number of ms (got ${show(value)})`);
}

/**
 * The positional parameters and algorithm options of one limit, as RL.TOKEN/PERIOD/SLIDE/LEAKY
 * and an RL.ALL group take them (without BAN, WAIT, DRYRUN, AT).
 * @param {'token'|'period'|'slide'|'leaky'} algorithm
 * @param {object} o
 * @returns {Array<string|number>}
 */
function limitArgs(algorithm, o) {
  if (NEEDS[algorithm]) options(o, algorithm, NEEDS[algorithm]);
  const a = [];
  switch (algorithm) {
    case 'token':
      a.push(toCount(required(o, 'capacity'), 'capacity'), toCount(required(o, 'rate'), 'rate'), toMs(required(o, 'period'), 'period'));
      if (flag(o.step, 'step')) a.push('STEP');
      break;
    case 'period':
      a.push(toCount(required(o, 'limit'), 'limit'), toMs(required(o, 'period'), 'period'));
      if (o.align !== undefined && o.align !== false && o.align !== null) {
        a.push('ALIGN');
        if (o.align !== true) a.push(toOffsetMs(o.align));
      }
      if (flag(o.keepPeriod, 'keepPeriod')) a.push('KEEPPERIOD');
      break;
    case 'slide':
      a.push(toCount(required(o, 'limit'), 'limit'), toMs(required(o, 'window', 'period'), 'window'));
      if (o.buckets !== undefined && o.buckets !== null) a.push('BUCKETS', toCount(o.buckets, 'buckets'));
      break;
    case 'leaky':
      a.push(toCount(required(o, 'capacity'), 'capacity'), toCount(required(o, 'rate'), 'rate'), toMs(required(o, 'period'), 'period'));
      if (flag(o.nodelay, 'nodelay')) a.push('NODELAY');
      if (o.delay !== undefined && o.delay !== null) a.push('DELAY', toCount(o.delay, 'delay'));
      break;
    default:
      throw new TypeError(`algorithm must be one of ${ALGORITHMS.join(', ')} (got ${show(algorithm)})`);
  }
  if (o.cost !== undefined && o.cost !== null) a.push('COST', toCount(o.cost, 'cost'));
  return a;
}

/**
 * BAN (and CLEAR), WAIT, DRYRUN, AT, FRESH and DEADLINE, in that order, from an options object.
 * `deadline` (unix ms on this machine's clock): a call the server runs after it counts nothing
 * and is refused with a DEADLINE error (every limiting command, RL.ALL, RL.HIT).
 */
function callOptions(o, { ban = true, wait = true, fresh = true, deadline = true } = {}) {
  const a = [];
  if (o === undefined || o === null) return a;
  if (ban && o.ban !== undefined && o.ban !== null) {
    a.push('BAN', toMs(o.ban, 'ban'));
    if (flag(o.clear, 'clear')) a.push('CLEAR');
  } else if (ban) {
    flag(o.clear, 'clear');
  }
  if (wait && o.wait !== undefined && o.wait !== null && o.wait !== false) a.push('WAIT', toMs(o.wait, 'wait'));
  if (flag(o.dryRun, 'dryRun')) a.push('DRYRUN');
  if (o.at !== undefined && o.at !== null) a.push('AT', toCount(o.at, 'at'));
  if (fresh && flag(o.fresh, 'fresh')) a.push('FRESH');
  if (deadline && o.deadline !== undefined && o.deadline !== null) a.push('DEADLINE', toCount(o.deadline, 'deadline'));
  return a;
}

/** The five-field decision every limiting command replies with. */
function decision(reply) {
  if (!Array.isArray(reply) || reply.length < 5) {
    throw new TypeError(`redis-ratelimit: unexpected reply ${JSON.stringify(reply)}`);
  }
  return {
    allowed: Number(reply[0]) === 1,
    limit: Number(reply[1]),
    remaining: Number(reply[2]),
    retryAfterMs: Number(reply[3]),
    resetAfterMs: Number(reply[4]),
  };
}

/** `window_start_ms` → `windowStartMs`. */
function camel(field) {
  return field.replace(/_([a-z0-9])/g, (_m, c) => c.toUpperCase());
}

/**
 * RL.INFO's field/value pairs (a flat array in RESP2, a map in RESP3) as an object with the
 * server's field names (snake_case); integers as numbers, `leases` as `{id, expiresMs}` pairs.
 */
function infoFields(reply) {
  if (reply === null || reply === undefined) return null;
  const out = {};
  const put = (k, v) => {
    const key = Buffer.isBuffer(k) ? k.toString() : String(k);
    if (Array.isArray(v)) out[key] = v.map((x) => (Buffer.isBuffer(x) ? x.toString() : x));
    else if (typeof v === 'number') out[key] = v;
    else if (v !== null && v !== undefined && /^-?\d+$/.test(String(v))) out[key] = Number(v);
    else out[key] = Buffer.isBuffer(v) ? v.toString() : v;
  };
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) put(reply[i], reply[i + 1]);
  } else if (reply instanceof Map) {
    for (const [k, v] of reply) put(k, v);
  } else if (typeof reply === 'object') {
    for (const k of Object.keys(reply)) put(k, reply[k]);
  }
  if (Array.isArray(out.leases)) {
    const pairs = [];
    for (let i = 0; i + 1 < out.leases.length; i += 2) pairs.push({ id: String(out.leases[i]), expiresMs: Number(out.leases[i + 1]) });
    out.leases = pairs;
  }
  return out;
}

/** RL.INFO as the client's info() returns it: infoFields with camelCase names, or null. */
function infoObject(reply) {
  const fields = infoFields(reply);
  if (fields === null) return null;
  const out = {};
  for (const k of Object.keys(fields)) out[camel(k)] = fields[k];
  return out;
}

module.exports = { ALGORITHMS, COMMAND_OF, NEEDS, flag, options, limitArgs, callOptions, decision, infoFields, infoObject, toOffsetMs };

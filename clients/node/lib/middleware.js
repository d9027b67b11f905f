'use strict';
/**
 * Express / Connect middleware: one module command per request, and the IETF headers of
 * draft-ietf-httpapi-ratelimit-headers-10 on every reply:
 *
 *     RateLimit-Policy: "default";q=100;w=60     quota q per window of w seconds
 *     RateLimit: "default";r=42;t=17             r left, t seconds until the limiter resets
 *
 * A refused request gets 429 with Retry-After (seconds, rounded up) and a JSON body, unless a
 * handler is given. Works on Express 4 and 5 and plain Connect (it uses only Node's response API).
 */
const { RateLimit } = require('./client');
const { toMs, toCount } = require('./duration');
const { ALGORITHMS, COMMAND_OF, limitArgs, callOptions, decision } = require('./commands');

const ceilS = (ms) => Math.ceil(ms / 1000);

/** The policy's quota and window (seconds): q permits per w seconds for each algorithm. */
function policyOf(o) {
  switch (o.algorithm) {
    case 'token':
    case 'leaky': {
      // A full bucket of `capacity` refills (drains) in capacity × period / rate.
      const capacity = toCount(o.capacity, 'capacity');
      return { q: capacity, w: ceilS((capacity * toMs(o.period, 'period')) / toCount(o.rate, 'rate')) };
    }
    case 'period':
      return { q: toCount(o.limit, 'limit'), w: ceilS(toMs(o.period, 'period')) };
    case 'slide':
      return { q: toCount(o.limit, 'limit'), w: ceilS(toMs(o.window !== undefined ? o.window : o.period, 'window')) };
    default:
      throw new TypeError(`algorithm must be one of ${ALGORITHMS.join(', ')}`);
  }
}

function defaultKey(req) {
  return req.ip || (req.socket && req.socket.remoteAddress) || 'unknown';
}

/**
 * @param {object} options
 * @param {object} options.client  ioredis / node-redis client or cluster (or a RateLimit)
 * @param {'token'|'period'|'slide'|'leaky'} [options.algorithm]  default 'token'
 * @param {(req) => string|Promise<string>} [options.key]  default: the client's address
 * @param {(req) => number|Promise<number>} [options.cost]  default 1
 * @param {string} [options.prefix]  prepended to every key (default "rl:")
 * @param {string} [options.policy]  the policy name in the headers (default "default")
 * @param {(req) => boolean|Promise<boolean>} [options.skip]
 * @param {(req, res, next, decision) => void} [options.handler]  replaces the default 429 reply
 * @param {boolean} [options.failOpen]  on a Redis error let the request through (default: next(err))
 * @param {number|string} [options.ban]  a refused request locks the key out this long (BAN)
 */
function rateLimit(options) {
  const o = { algorithm: 'token', ...options };
  if (!o.client) throw new TypeError('rateLimit needs a client');
  const limiter = o.client instanceof RateLimit ? o.client : new RateLimit(o.client);
  const prefix = o.prefix === undefined ? 'rl:' : o.prefix;
  const policyName = o.policy || 'default';
  const keyOf = o.key || defaultKey;
  const costOf = o.cost;
  const limitOpts = { ...o };
  for (const k of ['client', 'key', 'cost', 'prefix', 'policy', 'skip', 'handler', 'failOpen', 'algorithm']) delete limitOpts[k];
  // Validate the options once, at setup, not on the first request.
  limitArgs(o.algorithm, limitOpts);
  const { q, w } = policyOf(o);
  const policyHeader = `"${policyName}";q=${q};w=${w}`;

  // The command without its key (and cost, when a cost function is given), built once.
  const command = COMMAND_OF[o.algorithm];
  const fixedArgs = [
    ...limitArgs(o.algorithm, costOf ? { ...limitOpts, cost: undefined } : limitOpts),
    ...callOptions({ ban: o.ban }, { wait: false, fresh: false }), // BAN: the penalty box
  ].map(String);
  const transport = limiter.transport;
  const keyPrefix = (limiter.prefix || '') + prefix;

  const isThenable = (x) => x !== null && typeof x === 'object' && typeof x.then === 'function';
  const SKIPPED = Symbol('skipped');

  function send(key, cost) {
    const args = [command, transport.serverKey(keyPrefix + key), ...fixedArgs];
    if (costOf) args.push('COST', toCount(cost, 'cost'));
    return transport.send(args).then(decision);
  }

  // One command per request; no extra promise when key() and cost() are synchronous.
  function decide(req) {
    const key = keyOf(req);
    const cost = costOf ? costOf(req) : undefined;
    if (isThenable(key) || isThenable(cost)) return Promise.all([key, cost]).then(([k, c]) => send(k, c));
    return send(key, cost);
  }

  function respond(req, res, next, d) {
    res.setHeader('RateLimit-Policy', policyHeader);
    res.setHeader('RateLimit', `"${policyName}";r=${d.remaining};t=${ceilS(d.resetAfterMs)}`);
    req.rateLimit = d;
    if (d.allowed) {
      // RL.LEAKY in delay mode: the request proceeds after the water ahead of it has drained
      // (nginx limit_req); with nodelay (or any other algorithm) retryAfterMs is 0.
      if (d.retryAfterMs > 0) return void setTimeout(next, d.retryAfterMs);
      return next();
    }
    if (d.retryAfterMs >= 0) res.setHeader('Retry-After', String(ceilS(d.retryAfterMs)));
    if (o.handler) return o.handler(req, res, next, d);
    const body = JSON.stringify({ error: 'too many requests', retryAfterMs: d.retryAfterMs });
    res.statusCode = 429;
    res.setHeader('Content-Type', 'application/json');
    res.setHeader('Content-Length', Buffer.byteLength(body));
    return res.end(body);
  }

  return function rateLimitMiddleware(req, res, next) {
    let pending;
    try {
      pending = o.skip ? Promise.resolve(o.skip(req)).then((skip) => (skip ? SKIPPED : decide(req))) : decide(req);
    } catch (err) {
      pending = Promise.reject(err);
    }
    return pending.then(
      (d) => {
        if (d === SKIPPED) return next();
        try {
          return respond(req, res, next, d);
        } catch (err) {
          return next(err); // a throwing handler
        }
      },
      (err) => (o.failOpen ? next() : next(err)),
    );
  };
}

module.exports = { rateLimit, policyOf };

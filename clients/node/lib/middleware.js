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
const { createHash } = require('node:crypto');
const { countDecision } = require('./outcomes');
const { RateLimit } = require('./client');
const { toMs, toCount, show } = require('./duration');
const { ALGORITHMS, COMMAND_OF, limitArgs, callOptions, decision, infoObject, flag } = require('./commands');
const { RateLimitTimeoutError } = require('./errors');
const { addressKey } = require('./client-address');

/** The default timeout: a request waits at most this long for Redis before failOpen / next(err). */
const DEFAULT_TIMEOUT_MS = 500;

/** Default namespaces given out in this process → whether the sharing warning was given. */
const namespacesGiven = new Map();

/**
 * The default namespace of a middleware: "rl:", the algorithm, and 8 hex digits of a SHA-256 of
 * the command and its parameters (`rl:period:1a2b3c4d:`), so middlewares with different limits
 * never share a key (nor meet a key of another algorithm: WRONGTYPE), and every process of the
 * app derives the same name whatever order it builds its middlewares in. Two middlewares with
 * the same limit share the namespace — and so one counter per client: that is said once, as a
 * process warning (give each a `prefix` to count separately). Sharing is the safe side: a
 * middleware made per request, or in a different order in another process, still limits.
 */
function defaultNamespace(algorithm, fixedArgs) {
  const id = createHash('sha256').update([COMMAND_OF[algorithm], ...fixedArgs].join('\u0000')).digest('hex').slice(0, 8);
  const namespace = `rl:${algorithm}:${id}:`;
  if (namespacesGiven.has(namespace)) {
    if (!namespacesGiven.get(namespace)) {
      namespacesGiven.set(namespace, true);
      process.emitWarning(
        `rateLimit(): another middleware with the same limit shares the key namespace ${namespace} (one counter per client for both); ` +
          "give each its own `prefix` to count them separately, and make middlewares once at setup, not per request",
        { code: 'RL_SHARED_NAMESPACE' },
      );
    }
  } else {
    namespacesGiven.set(namespace, false);
  }
  return namespace;
}

const ceilS = (ms) => Math.ceil(ms / 1000);

/**
 * The default key prefix of a middleware on a server policy: the key is `ratelimit:` + the
 * tenant (the key function's result, by default the client's address as addressKey gives it),
 * the same key Python's and Go's middlewares write for the same tenant (docs/clients.md,
 * "Keys"). The policy name is not part of the key: a tenant moved to another tier keeps its
 * counter.
 */
const SERVER_POLICY_PREFIX = 'ratelimit:';

/** How long a server policy's definition (for the `w` of RateLimit-Policy) is reused, in ms. */
const POLICY_CACHE_MS = 5000;

/** The options that give the middleware a limit of its own (else `policy` names a server policy). */
const LIMIT_PARAMETERS = ['capacity', 'rate', 'period', 'limit', 'window'];

/**
 * A server policy's quota and window from its RL.POLICY GET fields (as infoObject reads them),
 * or null when they do not say (a newer algorithm).
 */
function policyOfDefinition(def) {
  if (!def || typeof def !== 'object') return null;
  const n = (x) => (typeof x === 'number' && Number.isSafeInteger(x) && x >= 0 ? x : null);
  switch (def.algorithm) {
    case 'token':
    case 'leaky': {
      const [capacity, rate, periodMs] = [n(def.capacity), n(def.rate), n(def.periodMs)];
      return capacity === null || !rate || periodMs === null ? null : { q: capacity, w: ceilS((capacity * periodMs) / rate) };
    }
    case 'period':
      return n(def.limit) === null || n(def.periodMs) === null ? null : { q: def.limit, w: ceilS(def.periodMs) };
    case 'slide':
      return n(def.limit) === null || n(def.windowMs) === null ? null : { q: def.limit, w: ceilS(def.windowMs) };
    default:
      return null;
  }
}

/**
 * Server policies' quota and window, read with RL.POLICY GET and reused for POLICY_CACHE_MS
 * (per client and policy name, shared by every middleware of the process): the first request
 * reads it beside its RL.HIT (in parallel), later ones use what is known and refresh it in the
 * background when it is older than POLICY_CACHE_MS — one module command per decision on the
 * hot path. A failed read (e.g. an ACL user without RL.POLICY GET) leaves `w` out.
 */
const policyCaches = new WeakMap();

function policyCache(transport) {
  let cache = policyCaches.get(transport);
  if (!cache) {
    cache = new Map();
    policyCaches.set(transport, cache);
  }
  return cache;
}

/** Refreshes `name`'s entry; resolves when it is known (never rejects). */
function readPolicy(transport, cache, name, timeoutMs) {
  const entry = cache.get(name) || { policy: null, readAt: -Infinity, pending: null };
  if (entry.pending) return entry.pending;
  let timer;
  const reply = transport.send(['RL.POLICY', 'GET', name], { keyIndex: -1, readonly: true });
  const late = timeoutMs ? new Promise((_r, reject) => (timer = setTimeout(() => reject(new Error('timeout')), timeoutMs))) : null;
  entry.pending = (late ? Promise.race([reply, late]) : reply)
    .then((r) => policyOfDefinition(infoObject(r)), () => null)
    .then((policy) => {
      clearTimeout(timer);
      entry.policy = policy;
      entry.readAt = Date.now();
      entry.pending = null;
      return policy;
    });
  reply.catch(() => {}); // a late failure after the timeout
  cache.set(name, entry);
  return entry.pending;
}

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

/** The client's address (Express' req.ip, which honours 'trust proxy'; else the socket's). */
function clientAddress(req) {
  return req.ip || (req.socket && req.socket.remoteAddress) || 'unknown';
}

/**
 * @param {object} options
 * @param {object} options.client  ioredis / node-redis client or cluster (or a RateLimit)
 * @param {'token'|'period'|'slide'|'leaky'} [options.algorithm]  default 'token'
 * @param {(req) => string|Promise<string>} [options.key]  default: the client's address (IPv6 by
 *   its /56); a key() answering undefined, null or "" falls back to the address
 * @param {(req) => number|Promise<number>} [options.cost]  default 1
 * @param {string} [options.prefix]  prepended to every key (default: see defaultNamespace)
 * @param {number|false} [options.ipv6Subnet]  IPv6 prefix length of the default key (default 56)
 * @param {number|string} [options.timeout]  answer when Redis has not replied within this
 *   (default 500 ms; 0: wait for the client library); each call carries `DEADLINE now+timeout`,
 *   so a call the server runs after that (queued behind a stall) counts nothing
 * @param {string} [options.policy]  the policy name in the headers (default "default"); given
 *   without a limit of the middleware's own (no algorithm, capacity, rate, period, limit,
 *   window), the server's policy of that name is the limit: RL.HIT policy key
 * @param {(req) => boolean|Promise<boolean>} [options.skip]
 * @param {(req, res, next, decision) => void} [options.handler]  replaces the default 429 reply
 * @param {boolean} [options.failOpen]  on a Redis error let the request through (default: next(err))
 * @param {number|string} [options.ban]  a refused request locks the key out this long (BAN)
 */
function rateLimit(options) {
  if (!options || typeof options !== 'object') throw new TypeError(`rateLimit needs an options object (got ${show(options)})`);
  // A policy name and no limit of its own: the limit is the server's policy (RL.HIT).
  const onServerPolicy = typeof options.policy === 'string' && options.algorithm === undefined && LIMIT_PARAMETERS.every((k) => options[k] === undefined);
  const o = { algorithm: 'token', ...options };
  if (!o.client) throw new TypeError('rateLimit needs a client');
  const limiter = o.client instanceof RateLimit ? o.client : new RateLimit(o.client);
  const policyName = o.policy || 'default';
  const subnet = o.ipv6Subnet === undefined ? 56 : o.ipv6Subnet;
  addressKey('::1', subnet); // validates ipv6Subnet at setup
  const timeoutMs = o.timeout === undefined || o.timeout === null ? DEFAULT_TIMEOUT_MS : toMs(o.timeout, 'timeout');
  if (o.key !== undefined && typeof o.key !== 'function') throw new TypeError(`key must be a function of the request (got ${show(o.key)})`);
  const defaultKey = (req) => addressKey(clientAddress(req), subnet);
  const costOf = o.cost;
  let command;
  let fixedArgs;
  let policyHeader; // null: from each reply (a server policy can change at any time)
  let defaultPrefix;
  if (onServerPolicy) {
    if (o.ban !== undefined) throw new TypeError('ban belongs to the server policy (setPolicy(name, limit, {ban})), not to the middleware');
    command = 'RL.HIT';
    fixedArgs = [];
    policyHeader = null;
    defaultPrefix = SERVER_POLICY_PREFIX;
  } else {
    const limitOpts = { ...o };
    for (const k of ['client', 'key', 'cost', 'prefix', 'policy', 'skip', 'handler', 'failOpen', 'algorithm', 'timeout', 'ipv6Subnet']) delete limitOpts[k];
    // Validate the options once, at setup, not on the first request.
    limitArgs(o.algorithm, limitOpts);
    const { q, w } = policyOf(o);
    policyHeader = `"${policyName}";q=${q};w=${w}`;
    // The command without its key (and cost, when a cost function is given), built once.
    command = COMMAND_OF[o.algorithm];
    fixedArgs = [
      ...limitArgs(o.algorithm, costOf ? { ...limitOpts, cost: undefined } : limitOpts),
      ...callOptions({ ban: o.ban }, { wait: false, fresh: false }), // BAN: the penalty box
    ].map(String);
    defaultPrefix = null;
  }
  const transport = limiter.transport;
  // Only a leaky bucket of the middleware's own in delay mode holds admitted requests (its
  // reply's retryAfterMs is the delay); any other admitted reply with a retry time — a SHADOW
  // policy's would-be refusal — goes through at once. A server policy never delays.
  const delays = !onServerPolicy && o.algorithm === 'leaky' && !flag(o.nodelay, 'nodelay');
  const failOpen = flag(o.failOpen, 'failOpen');
  const policies = onServerPolicy ? policyCache(transport) : null;
  const prefix = o.prefix !== undefined && o.prefix !== null ? String(o.prefix) : defaultPrefix || defaultNamespace(o.algorithm, fixedArgs);
  const keyPrefix = (limiter.prefix || '') + prefix;

  const isThenable = (x) => x !== null && typeof x === 'object' && typeof x.then === 'function';
  const SKIPPED = Symbol('skipped');

  /** key() answering nothing (undefined, null, "") means "no key of its own": the address. */
  const keyOrAddress = (key, req) => (key === undefined || key === null || key === '' ? defaultKey(req) : key);

  /** The reply, or a RateLimitTimeoutError once this machine's clock is past `deadline` (the
   * instant sent as DEADLINE, so a call the server runs after the error counts nothing). A timer
   * alone can fire early by that clock: libuv measures it from the event loop's cached time,
   * which lags Date.now() by as long as the loop's current turn has run; it is armed again for
   * what is left. */
  function withTimeout(reply, deadline) {
    if (!timeoutMs) return reply;
    let timer;
    const late = new Promise((_resolve, reject) => {
      const expire = () => {
        const left = deadline - Date.now();
        if (left >= 0) timer = setTimeout(expire, left + 1);
        else reject(new RateLimitTimeoutError(timeoutMs, command));
      };
      timer = setTimeout(expire, timeoutMs);
    });
    return Promise.race([reply, late]).finally(() => clearTimeout(timer));
  }

  /** A server's DEADLINE error (the call arrived after this middleware gave up): a timeout. */
  function deadlinePassed(err) {
    if (err && (err.code === 'DEADLINE' || /^DEADLINE /.test(String(err.message)))) throw new RateLimitTimeoutError(timeoutMs, command);
    throw err;
  }

  function send(req, key, cost) {
    const serverKey = transport.serverKey(keyPrefix + keyOrAddress(key, req));
    const args = onServerPolicy ? [command, policyName, serverKey] : [command, serverKey, ...fixedArgs];
    if (costOf) args.push('COST', toCount(cost, 'cost'));
    // The instant this request stops waiting: a call the server runs later (queued behind a
    // stall) counts nothing (issue 31, defect 8).
    const deadline = Date.now() + timeoutMs;
    if (timeoutMs) args.push('DEADLINE', deadline);
    const decided = withTimeout(transport.send(args, { keyIndex: onServerPolicy ? 2 : 1 }).catch(deadlinePassed), deadline).then(decision);
    if (!onServerPolicy) return decided;
    // The policy's window for RateLimit-Policy: read once beside the first decision, then reused.
    const entry = policies.get(policyName);
    if (entry === undefined) return Promise.all([decided, readPolicy(transport, policies, policyName, timeoutMs)]).then(([d]) => d);
    if (Date.now() - entry.readAt > POLICY_CACHE_MS) readPolicy(transport, policies, policyName, timeoutMs);
    return decided;
  }

  /** RateLimit-Policy of a reply: the middleware's own limit, or the server policy's quota
   * (from the reply) and window (from its definition, when the reply is under it and not
   * under a key's override of another quota). */
  function policyHeaderOf(d) {
    if (policyHeader) return policyHeader;
    const entry = policies.get(policyName);
    const known = entry && entry.policy;
    return known && known.q === d.limit ? `"${policyName}";q=${d.limit};w=${known.w}` : `"${policyName}";q=${d.limit}`;
  }

  // One command per request; no extra promise when key() and cost() are synchronous.
  function decide(req) {
    const key = o.key ? o.key(req) : defaultKey(req);
    const cost = costOf ? costOf(req) : undefined;
    if (isThenable(key) || isThenable(cost)) return Promise.all([key, cost]).then(([k, c]) => send(req, k, c));
    return send(req, key, cost);
  }

  function respond(req, res, next, d) {
    res.setHeader('RateLimit-Policy', policyHeaderOf(d));
    res.setHeader('RateLimit', `"${policyName}";r=${d.remaining};t=${ceilS(d.resetAfterMs)}`);
    req.rateLimit = d;
    if (d.allowed) {
      // RL.LEAKY in delay mode: the request proceeds after the water ahead of it has drained
      // (nginx limit_req). Nothing else waits: a SHADOW policy's admitted would-be refusal
      // carries a retry time too, and must not hold the request (issue 31, defect 3).
      if (delays && d.retryAfterMs > 0) return void setTimeout(next, d.retryAfterMs);
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
        countDecision(policyName, d.allowed ? 'admitted' : 'limited');
        try {
          return respond(req, res, next, d);
        } catch (err) {
          return next(err); // a throwing handler
        }
      },
      (err) => {
        countDecision(policyName, 'error');
        return failOpen ? next() : next(err);
      },
    );
  };
}

module.exports = { rateLimit, policyOf, policyOfDefinition, DEFAULT_TIMEOUT_MS, SERVER_POLICY_PREFIX, POLICY_CACHE_MS };

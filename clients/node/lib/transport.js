'use strict';
/**
 * One command, one round trip, to the node that owns the key — whatever client the caller has:
 * an ioredis `Redis` or `Cluster`, a node-redis (v4 or v5) client or cluster, or a bare
 * `sendCommand(...args)` function (the shape rate-limit-redis takes).
 *
 * Cluster clients route a command by the keys they know it to have; they do not know the
 * module's commands, so each command is sent with its slot computed here (ioredis: a Command
 * whose slot is set; node-redis: the key given as the routing key). No `MOVED` round trip in
 * steady state.
 *
 * Calls that may count are never sent twice: ioredis re-sends the commands a closed connection
 * left unanswered once it reconnects (autoResendUnfulfilledCommands); the transport takes the
 * limiting ones out of that queue and rejects them (CallMayHaveCountedError). A call with
 * `WAIT t` gets a command timeout covering its wait (ioredis' commandTimeout would cut it off
 * and leave it counting on the server); one longer than ioredis' socketTimeout is refused
 * before it is sent.
 */
const { keySlot } = require('./slot');
const { translateError, CallMayHaveCountedError } = require('./errors');

/** Commands that change a limiter: a copy may count again. */
const COUNTING = new Set(['rl.token', 'rl.period', 'rl.slide', 'rl.leaky', 'cl.throttle', 'rl.all', 'rl.hit', 'rl.acquire', 'rl.refund', 'rl.charge', 'rl.release']);

function counts(command) {
  return !!command && typeof command.name === 'string' && COUNTING.has(command.name.toLowerCase());
}

/**
 * ioredis closed a connection: the limiting calls it left unanswered (kept to be re-sent on the
 * next connection) are taken out and rejected.
 */
function dropUnansweredCalls(client) {
  for (const queue of [client.prevCommandQueue, client.commandQueue]) {
    if (!queue || typeof queue.toArray !== 'function') continue;
    const items = queue.toArray();
    const dropped = items.filter((item) => counts(item.command));
    if (dropped.length === 0) continue;
    queue.clear();
    for (const item of items) if (!counts(item.command)) queue.push(item);
    for (const item of dropped) item.command.reject(new CallMayHaveCountedError(item.command.name.toUpperCase()));
  }
}

/** The ms a call's `WAIT t` may wait (0: without limit), or undefined without WAIT. */
function waitOf(argv, keyIndex) {
  for (let i = Math.max(keyIndex, 1) + 1; i < argv.length - 1; i++) {
    if (typeof argv[i] === 'string' && argv[i].toUpperCase() === 'WAIT') return Number(argv[i + 1]);
  }
  return undefined;
}

/** The longest timer Node runs (about 24.8 days): "no timeout" for a wait without limit. */
const NO_TIMEOUT_MS = 2147483647;

const transports = new WeakMap();

function stringArgs(args) {
  return args.map((a) => (Buffer.isBuffer(a) ? a : String(a)));
}

function detect(client) {
  if (typeof client === 'function') return 'function';
  if (client === null || typeof client !== 'object') return null;
  if (client.isCluster === true && typeof client.sendCommand === 'function') return 'ioredis-cluster';
  if (typeof client.call === 'function' && typeof client.sendCommand === 'function') return 'ioredis';
  if (typeof client.sendCommand === 'function' && (typeof client.getSlotMaster === 'function' || 'masters' in client)) {
    return 'node-redis-cluster';
  }
  if (typeof client.sendCommand === 'function') return 'node-redis';
  return null;
}

let ioredisCommand;
function loadIoredisCommand() {
  if (ioredisCommand === undefined) {
    try {
      ioredisCommand = require('ioredis').Command || null; // the peer dependency, the caller's copy
    } catch {
      ioredisCommand = null;
    }
  }
  return ioredisCommand;
}

class Transport {
  /**
   * The transport of a client (one per client object).
   * @param {object|Function} client
   */
  static of(client) {
    if (client instanceof Transport) return client;
    if (client && typeof client === 'object') {
      const known = transports.get(client);
      if (known) return known;
    }
    const t = new Transport(client);
    if (client && typeof client === 'object') transports.set(client, t);
    return t;
  }

  constructor(client) {
    const kind = detect(client);
    if (!kind) {
      throw new TypeError(
        'redis-ratelimit: pass an ioredis Redis or Cluster, a node-redis client or cluster, or a sendCommand(...args) function',
      );
    }
    this.client = client;
    this.kind = kind;
    const prefix = client && client.options && client.options.keyPrefix;
    /** ioredis' keyPrefix option: ioredis applies it only to commands it knows, so it is applied here. */
    this.keyPrefix = (kind === 'ioredis' || kind === 'ioredis-cluster') && prefix ? prefix : '';
    if (kind === 'ioredis' && typeof client.on === 'function') client.on('close', () => dropUnansweredCalls(client));
  }

  /** The key as the server sees it (with the client's keyPrefix). */
  serverKey(key) {
    if (!this.keyPrefix) return key;
    return Buffer.isBuffer(key) ? Buffer.concat([Buffer.from(this.keyPrefix), key]) : this.keyPrefix + key;
  }

  /**
   * Sends one command whose first key is `args[keyIndex]` (already prefixed by the caller through
   * serverKey) and resolves to the server's reply. Server errors keep their code and text; an
   * unknown module command becomes a ModuleNotLoadedError.
   * @param {Array<string|number|Buffer>} args  the whole command, name first
   * @param {{keyIndex?: number, readonly?: boolean}} [opts]
   */
  send(args, opts = {}) {
    const keyIndex = opts.keyIndex === undefined ? 1 : opts.keyIndex;
    // ioredis converts numbers itself; node-redis and sendCommand functions take strings.
    const argv = this.kind === 'ioredis' || this.kind === 'ioredis-cluster' ? args : stringArgs(args);
    let reply;
    try {
      reply = this._send(argv, argv[keyIndex], !!opts.readonly, waitOf(argv, keyIndex));
    } catch (err) {
      return Promise.reject(translateError(err, String(argv[0]).toUpperCase()));
    }
    return Promise.resolve(reply).catch((err) => {
      throw translateError(err, String(argv[0]).toUpperCase());
    });
  }

  /**
   * Sends one keyless command to every primary of a cluster client (to the one server
   * otherwise) and resolves to the replies, one per primary, in the cluster's order. Server
   * errors as send's.
   * @param {Array<string|number|Buffer>} args
   * @returns {Promise<unknown[]>}
   */
  async sendToPrimaries(args) {
    const command = String(args[0]).toUpperCase();
    const c = this.client;
    try {
      if (this.kind === 'ioredis-cluster') {
        const nodes = c.nodes('master');
        if (nodes.length === 0) throw new Error('redis-ratelimit: the cluster client knows no primary yet');
        return await Promise.all(nodes.map((node) => node.call(...args)));
      }
      if (this.kind === 'node-redis-cluster') {
        const argv = stringArgs(args);
        const masters = typeof c.getMasters === 'function' ? c.getMasters() : c.masters;
        return await Promise.all(masters.map(async (node) => (await c.nodeClient(node)).sendCommand(argv)));
      }
    } catch (err) {
      throw translateError(err, command);
    }
    return [await this.send(args, { keyIndex: -1 })];
  }

  _send(argv, key, readonly, waitMs) {
    const c = this.client;
    switch (this.kind) {
      case 'function':
        return c(...argv);
      case 'ioredis':
        if (waitMs !== undefined) return this._sendWaiting(argv, waitMs);
        return c.call(...argv);
      case 'ioredis-cluster': {
        const Command = loadIoredisCommand();
        if (!Command || key === undefined) return c.call(...argv);
        const command = new Command(argv[0], argv.slice(1), { replyEncoding: 'utf8' });
        command.slot = keySlot(Buffer.isBuffer(key) ? key : String(key)); // routes to the owner of the key (ioredis reads command.slot)
        return c.sendCommand(command);
      }
      case 'node-redis':
        return c.sendCommand(argv);
      case 'node-redis-cluster':
        return c.sendCommand(key, readonly, argv);
      default:
        throw new Error('unreachable');
    }
  }

  /**
   * An ioredis call with `WAIT waitMs`: its command timeout covers the wait (plus the client's
   * commandTimeout, for the answer itself); refused when the client's socketTimeout (no data for
   * that long destroys the connection) is shorter than the wait.
   */
  _sendWaiting(argv, waitMs) {
    const c = this.client;
    const { commandTimeout, socketTimeout } = c.options || {};
    if (typeof socketTimeout === 'number' && (waitMs === 0 || waitMs >= socketTimeout)) {
      throw new RangeError(
        `redis-ratelimit: WAIT ${waitMs === 0 ? '0 (without limit)' : `${waitMs} ms`} needs a connection whose socketTimeout exceeds it (this one's is ${socketTimeout} ms): use a client without socketTimeout, or a shorter wait`,
      );
    }
    const Command = loadIoredisCommand();
    if (!Command || typeof commandTimeout !== 'number') return c.call(...argv);
    const command = new Command(argv[0], argv.slice(1), { keyPrefix: c.options.keyPrefix, replyEncoding: 'utf8' });
    // Set before ioredis sets its own: the first timeout set on a command is the one that runs.
    command.setTimeout(waitMs === 0 ? NO_TIMEOUT_MS : Math.min(waitMs + commandTimeout, NO_TIMEOUT_MS));
    return c.sendCommand(command);
  }
}

module.exports = { Transport, detect };

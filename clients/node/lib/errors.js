'use strict';

/**
 * Raised when the server answers that it does not know a command of the module: the module is
 * not loaded there. Its message says how to load it; `cause` is the server's own error.
 */
/** Commands a module loaded but older than this package may not have. */
const NEWER_COMMANDS = new Set(['RL.POLICY', 'RL.HIT']);

class ModuleNotLoadedError extends Error {
  constructor(command, cause) {
    super(
      `redis-ratelimit: the server does not know ${command}: the redis-ratelimit module is not loaded there` +
        (NEWER_COMMANDS.has(command) ? ` (or it is a version older than ${command}: RL.POLICY and RL.HIT came in 0.3.0)` : '') +
        '. ' +
        'Load it with `redis-server --loadmodule /path/to/libredis_ratelimit.so`, a `loadmodule` line in redis.conf, ' +
        'or `MODULE LOAD /path/to/libredis_ratelimit.so` (build it with `make build` in the repository: ' +
        `target/release/libredis_ratelimit.so). Server said: ${cause && cause.message}`,
    );
    this.name = 'ModuleNotLoadedError';
    this.code = 'ERR';
    this.command = command;
    this.cause = cause;
  }
}

/**
 * The middleware's answer when Redis has not replied within its `timeout` (Redis down, hung, or
 * the client still queueing commands while it reconnects). `code` is 'ETIMEDOUT'.
 */
class RateLimitTimeoutError extends Error {
  constructor(ms, command) {
    super(`redis-ratelimit: no reply from Redis to ${command} within ${ms} ms`);
    this.name = 'RateLimitTimeoutError';
    this.code = 'ETIMEDOUT';
    this.command = command;
    this.timeoutMs = ms;
  }
}

/**
 * A call that changes a limiter (a limiting command, RL.ALL, RL.HIT, RL.ACQUIRE, RL.REFUND,
 * RL.CHARGE, RL.RELEASE) was sent and its connection closed before the reply: it may have
 * counted, so it is not sent again on the next connection (ioredis would). `code` is
 * 'ECONNRESET'.
 */
class CallMayHaveCountedError extends Error {
  constructor(command) {
    super(`redis-ratelimit: the connection closed before ${command} was answered; it may have counted, so it is not sent again`);
    this.name = 'CallMayHaveCountedError';
    this.code = 'ECONNRESET';
    this.command = command;
  }
}

const UNKNOWN_COMMAND_RE = /unknown command\s+['`]?(rl\.|cl\.throttle)/i;

/** A server error's text starts with its code: `ERR …`, `WRONGTYPE …`, `NOSCRIPT …`, `MOVED …`. */
const SERVER_CODE_RE = /^([A-Z][A-Z0-9_]*)(?:\s|$)/;

/**
 * The error to hand the caller: the server's own error object (its class and text kept) with
 * `code` set to the first word of its text when the client library did not set one (ioredis'
 * ReplyError and node-redis' ErrorReply do not), except an unknown-command error for a module
 * command, which becomes a ModuleNotLoadedError. Errors that are not the server's (connection
 * errors, with their own `code` such as ECONNREFUSED) pass through untouched.
 */
function translateError(err, command) {
  if (err && typeof err.message === 'string' && UNKNOWN_COMMAND_RE.test(err.message)) {
    return new ModuleNotLoadedError(command, err);
  }
  if (err && typeof err === 'object' && err.code === undefined && typeof err.message === 'string') {
    const m = SERVER_CODE_RE.exec(err.message);
    if (m) {
      try {
        err.code = m[1];
      } catch {
        /* a frozen error: left as it is */
      }
    }
  }
  return err;
}

module.exports = { ModuleNotLoadedError, RateLimitTimeoutError, CallMayHaveCountedError, translateError };

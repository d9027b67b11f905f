'use strict';

/**
 * Raised when the server answers that it does not know a command of the module: the module is
 * not loaded there. Its message says how to load it; `cause` is the server's own error.
 */
class ModuleNotLoadedError extends Error {
  constructor(command, cause) {
    super(
      `redis-ratelimit: the server does not know ${command}: the redis-ratelimit module is not loaded there. ` +
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

const UNKNOWN_COMMAND_RE = /unknown command\s+['`]?(rl\.|cl\.throttle)/i;

/**
 * The error to hand the caller: the server's own error object, untouched (its code and text
 * kept), except an unknown-command error for a module command, which becomes a
 * ModuleNotLoadedError.
 */
function translateError(err, command) {
  if (err && typeof err.message === 'string' && UNKNOWN_COMMAND_RE.test(err.message)) {
    return new ModuleNotLoadedError(command, err);
  }
  return err;
}

module.exports = { ModuleNotLoadedError, translateError };

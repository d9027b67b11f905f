'use strict';
/**
 * The host libraries are peer dependencies: they resolve from where this package is installed,
 * to the application's own copies. When one cannot be found, the error says where it was looked
 * for — the usual cause is a package installed as a symlink (`npm link`, `npm install <folder>`),
 * whose peers resolve from the checkout, not from the application.
 */
const path = require('node:path');

/** The advice for a host library `peer` that cannot be loaded from this package. */
function missingPeerMessage(peer, err) {
  const from = path.resolve(__dirname, '..');
  return (
    `redis-ratelimit: ${peer} is a peer dependency and could not be loaded from ${from} ` +
    `(${err && err.message ? err.message.split('\n')[0] : err}). Install it in your application (npm install ${peer}); ` +
    'if it is installed there, redis-ratelimit is probably a symlink into a checkout (npm link or npm install <folder>): ' +
    'install the package tarball instead (npm install ./redis-ratelimit-<version>.tgz).'
  );
}

function isMissing(err, peer) {
  return !!err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes(peer);
}

/**
 * `load()`'s class, or — when `peer` is not installed — a class of the same name whose
 * constructor throws the install advice (so the name is still importable).
 */
function peerClass(peer, name, load) {
  try {
    return load();
  } catch (err) {
    const cause = err && err.peerCause ? err.peerCause : err;
    if (!isMissing(cause, peer)) throw err;
    const message = missingPeerMessage(peer, cause);
    const stub = {
      [name]: class {
        constructor() {
          throw Object.assign(new Error(message), { code: 'ERR_PEER_MISSING', cause });
        }
      },
    };
    return stub[name];
  }
}

module.exports = { peerClass, missingPeerMessage, isMissing };

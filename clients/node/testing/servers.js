'use strict';
/**
 * Real redis-server processes for the package's tests: each on a free loopback port, with the
 * module loaded (RL_MODULE, default ../../target/release/libredis_ratelimit.so), a startup
 * deadline, and teardown when the test ends or the process exits. Standalone servers and small
 * clusters (3 masters). RL_SERVER names another server binary (e.g. valkey-server).
 */
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const MODULE = path.resolve(process.env.RL_MODULE || path.join(__dirname, '..', '..', '..', 'target', 'release', 'libredis_ratelimit.so'));
const SERVER = process.env.RL_SERVER || 'redis-server';
const STARTUP_DEADLINE_MS = 10000;
const live = new Set();

process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** One command over a raw connection (inline protocol); resolves to the reply's text. */
function rawCommand(port, line, timeoutMs = 1000) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error('timeout'));
    }, timeoutMs);
    sock.on('connect', () => sock.write(`${line}\r\n`));
    sock.on('data', (d) => {
      buf += d.toString();
      const m = /^\$(\d+)\r\n/.exec(buf);
      if (m ? buf.length >= m[0].length + Number(m[1]) + 2 : buf.endsWith('\r\n')) {
        clearTimeout(timer);
        sock.end();
        resolve(m ? buf.slice(m[0].length, m[0].length + Number(m[1])) : buf.trim());
      }
    });
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

async function waitFor(check, what) {
  const deadline = Date.now() + STARTUP_DEADLINE_MS;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${STARTUP_DEADLINE_MS} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Starts a server on a free port. `module: false` starts one without the module.
 * @returns {Promise<{port: number, stop: () => Promise<void>, log: () => string}>}
 */
async function startServer({ module = true, args = [] } = {}) {
  if (module && !fs.existsSync(MODULE)) throw new Error(`module ${MODULE} not built: run make build (or set RL_MODULE)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-test-'));
  const port = await freePort();
  const argv = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--logfile', path.join(dir, 'log')];
  if (module) argv.push('--loadmodule', MODULE);
  argv.push(...args);
  const child = spawn(SERVER, argv, { stdio: 'ignore' });
  live.add(child);
  let exited = false;
  child.on('exit', () => {
    exited = true;
    live.delete(child);
  });
  const log = () => {
    try {
      return fs.readFileSync(path.join(dir, 'log'), 'utf8');
    } catch {
      return '';
    }
  };
  try {
    await waitFor(async () => {
      if (exited) throw Object.assign(new Error(`redis-server exited:\n${log()}`), { fatal: true });
      return (await rawCommand(port, 'PING')) === '+PONG';
    }, `redis-server on ${port}`);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${err.message}\n${log()}`);
  }
  const stop = async () => {
    if (exited) return;
    const done = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await done;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return { port, dir, stop, log, child };
}

/**
 * A cluster of `masters` nodes (no replicas) on free ports, slots spread by redis-cli.
 * @returns {Promise<{ports: number[], nodes: object[], stop: () => Promise<void>}>}
 */
async function startCluster({ masters = 3 } = {}) {
  const nodes = [];
  for (let i = 0; i < masters; i++) {
    nodes.push(await startServer({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000'] }));
  }
  const ports = nodes.map((n) => n.port);
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  };
  try {
    execFileSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], {
      stdio: 'pipe',
      timeout: STARTUP_DEADLINE_MS,
    });
    await waitFor(async () => {
      for (const p of ports) {
        if (!/cluster_state:ok/.test(await rawCommand(p, 'CLUSTER INFO'))) return false;
      }
      return true;
    }, 'cluster');
  } catch (err) {
    await stop();
    throw err;
  }
  return { ports, nodes, stop };
}

/** INFO <section> of a server as an object of fields. */
async function info(port, section) {
  const text = await rawCommand(port, `INFO ${section}`);
  const out = {};
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** Calls of each command since start (INFO commandstats): {"rl.token": 3, ...}. */
async function commandCalls(port) {
  const stats = await info(port, 'commandstats');
  const out = {};
  for (const [k, v] of Object.entries(stats)) {
    const m = /^cmdstat_(.+)$/.exec(k);
    const c = /calls=(\d+)/.exec(v);
    if (m && c) out[m[1]] = Number(c[1]);
  }
  return out;
}

/** MOVED replies a node has sent (INFO errorstats). */
async function movedCount(port) {
  const stats = await info(port, 'errorstats');
  const m = /count=(\d+)/.exec(stats.errorstat_MOVED || '');
  return m ? Number(m[1]) : 0;
}

/**
 * One server with the module and an ioredis client on it for a whole test file: registers the
 * `before` and `after` hooks given (node:test's) and returns an object whose `server` and
 * `redis` are set once `before` has run.
 * @param {{before: Function, after: Function}} hooks
 * @param {object} [options]  startServer's options
 * @returns {{server: object, redis: import('ioredis').Redis}}
 */
function useServer({ before, after }, options) {
  const Redis = require('ioredis');
  const ctx = { server: null, redis: null };
  before(async () => {
    ctx.server = await startServer(options);
    ctx.redis = new Redis({ port: ctx.server.port });
  });
  after(async () => {
    if (ctx.redis) ctx.redis.disconnect();
    if (ctx.server) await ctx.server.stop();
  });
  return ctx;
}

module.exports = { startServer, startCluster, useServer, rawCommand, info, commandCalls, movedCount, MODULE };

'use strict';
// Regression suite "install from the tarball" (issue 23): the package as users install it —
// `npm pack`'s redis-ratelimit-<version>.tgz installed into a fresh project with its peers
// (the pinned versions, from npm's cache when it has them) — runs the README's snippets against
// a real server, and still does after a later plain `npm install <another peer>` (which turned
// the README's former `--install-links <folder>` install back into a symlink whose peers were not
// found). Every export imports by name from ESM there; a peer that is not installed is an
// install advice when the class is used, not an import failure.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startServer } = require('../testing/servers');

const pkgDir = path.join(__dirname, '..');
const pkg = require('../package.json');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

let server;
let dir;
let tgz;
before(async () => {
  server = await startServer();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-install-'));
  const packed = execFileSync(npm, ['pack', '--silent', '--pack-destination', dir], { cwd: pkgDir, encoding: 'utf8' }).trim().split('\n').pop();
  tgz = path.join(dir, packed);
  fs.mkdirSync(path.join(dir, 'app'));
  fs.writeFileSync(path.join(dir, 'app', 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
});
after(async () => {
  await server.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const app = () => path.join(dir, 'app');
function npmInstall(...specs) {
  execFileSync(npm, ['install', ...NPM_FLAGS, ...specs], { cwd: app(), stdio: 'pipe', encoding: 'utf8' });
}
/** Runs `source` as a file of the app (.mjs or .cjs); resolves to its stdout. */
function run(file, source) {
  fs.writeFileSync(path.join(app(), file), source);
  const r = spawnSync(process.execPath, [file], { cwd: app(), encoding: 'utf8', env: { ...process.env, PORT: String(server.port) } });
  assert.equal(r.status, 0, `${file}: ${r.stderr}`);
  return r.stdout.trim();
}

const README_RLF = `
const Redis = require('ioredis');
const { RateLimiterRedisModule } = require('redis-ratelimit');
const redis = new Redis({ port: Number(process.env.PORT) });
const limiter = new RateLimiterRedisModule({ storeClient: redis, points: 10, duration: 1, keyPrefix: 'install-' + process.argv[2] });
limiter.consume('203.0.113.1').then((res) => { console.log(res.remainingPoints); redis.disconnect(); },
  (err) => { console.error(err); process.exit(1); });
`;

test('the tarball is named redis-ratelimit-<version>.tgz and holds the ESM entry and both declarations', () => {
  assert.equal(path.basename(tgz), `redis-ratelimit-${pkg.version}.tgz`);
  const list = execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' });
  for (const f of ['package/lib/index.js', 'package/lib/index.mjs', 'package/lib/index.d.ts', 'package/lib/index.d.mts', 'package/README.md']) {
    assert.ok(list.includes(f), `${f} in the tarball`);
  }
  assert.ok(!/package\/test\//.test(list), 'no tests in the tarball');
  const readme = fs.readFileSync(path.join(pkgDir, 'README.md'), 'utf8');
  assert.ok(readme.includes(`npm install ./redis-ratelimit-${pkg.version}.tgz`), 'the README installs this version\'s tarball');
});

test('installed with ioredis only: ESM imports every name; the client works; a missing peer is an install advice', () => {
  npmInstall(tgz, `ioredis@${pkg.devDependencies.ioredis}`);
  assert.equal(fs.lstatSync(path.join(app(), 'node_modules', 'redis-ratelimit')).isSymbolicLink(), false, 'a copy, not a symlink');
  const recorded = JSON.parse(fs.readFileSync(path.join(app(), 'package.json'), 'utf8')).dependencies['redis-ratelimit'];
  assert.match(recorded, /^file:.*redis-ratelimit-.*\.tgz$/, 'package.json records the tarball');
  const out = run(
    'esm.mjs',
    `import { Redis } from 'ioredis';
import { RateLimit, RateLimiterRedisModule, RedisModuleStore, ThrottlerStorageRedisModule } from 'redis-ratelimit';
const redis = new Redis({ port: Number(process.env.PORT) });
const d = await new RateLimit(redis, { prefix: 'api:' }).token('key42', { capacity: 100, rate: 10, period: '1s' });
let advice = '';
try { new RateLimiterRedisModule({ storeClient: redis, points: 1, duration: 1 }); } catch (err) { advice = err.code + ' ' + err.message; }
console.log(JSON.stringify({ remaining: d.remaining, advice, store: typeof RedisModuleStore, nest: typeof ThrottlerStorageRedisModule }));
redis.disconnect();`,
  );
  const r = JSON.parse(out);
  assert.equal(r.remaining, 99);
  assert.match(r.advice, /^ERR_PEER_MISSING .*npm install rate-limiter-flexible/);
  assert.deepEqual([r.store, r.nest], ['function', 'function']);
});

test('the README snippet runs, and still runs after a later plain npm install of another peer', () => {
  npmInstall(`rate-limiter-flexible@${pkg.devDependencies['rate-limiter-flexible']}`);
  assert.equal(run('rlf.cjs', README_RLF.replace("process.argv[2]", "'a'")), '9');
  npmInstall(`express-rate-limit@${pkg.devDependencies['express-rate-limit']}`);
  assert.equal(fs.lstatSync(path.join(app(), 'node_modules', 'redis-ratelimit')).isSymbolicLink(), false, 'still a copy');
  assert.equal(run('rlf.cjs', README_RLF.replace("process.argv[2]", "'b'")), '9');
  // and the express-rate-limit store from the same install
  const out = run(
    'erl.cjs',
    `const Redis = require('ioredis');
const { RedisModuleStore } = require('redis-ratelimit');
const redis = new Redis({ port: Number(process.env.PORT) });
const store = new RedisModuleStore({ client: redis, prefix: 'install-erl:' });
store.init({ windowMs: 60000, limit: 5 });
store.increment('ip').then((r) => { console.log(r.totalHits); redis.disconnect(); });`,
  );
  assert.equal(out, '1');
});

'use strict';
// Regression suite "module formats" (issue 23): every export is importable by name from ESM
// (through the package's exports map, as an application resolves it), from CommonJS, and from
// TypeScript under --module nodenext (an .mts and a .cts file) and --module commonjs
// (test/types.test.js); the ESM names are the CommonJS objects themselves.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const pkgDir = path.join(__dirname, '..');
const tsc = path.join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc');

test('ESM: every export of the CommonJS package imports by name, the same objects', () => {
  const r = spawnSync(process.execPath, [path.join(__dirname, 'esm', 'import-every-export.mjs')], { encoding: 'utf8', cwd: pkgDir });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  const cjsNames = Object.keys(require('redis-ratelimit')).sort();
  assert.deepEqual(Object.keys(out.named).sort(), cjsNames, 'the .mjs test imports every CommonJS export');
  assert.deepEqual(out.namespace, cjsNames, 'the ESM namespace has exactly the CommonJS names');
  for (const [name, type] of Object.entries(out.named)) assert.equal(type, 'function', name);
  assert.equal(out.sameAsRequire, true);
});

test('ESM: the CommonJS entry file itself shows every export by name (what Node detects in it)', () => {
  // A loader or bundler that resolves "main" rather than the "import" condition, or an import
  // of the file by path, sees only the names Node's static CommonJS detection finds in index.js.
  const entry = JSON.stringify(require('node:url').pathToFileURL(path.join(pkgDir, 'lib', 'index.js')).href);
  const code = `import * as ns from ${entry}; process.stdout.write(JSON.stringify(Object.keys(ns).filter((k) => k !== 'default').sort()));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', cwd: pkgDir });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), Object.keys(require('redis-ratelimit')).sort());
});

test('CommonJS: require by the package name gives every export', () => {
  const pkg = require('redis-ratelimit');
  for (const name of ['RateLimit', 'rateLimit', 'ModuleNotLoadedError', 'RateLimitTimeoutError', 'CallMayHaveCountedError', 'keySlot', 'RateLimiterRedisModule', 'RateLimiterUnionModule', 'RateLimiterQueueModule', 'ThrottlerStorageRedisModule', 'ThrottlerStorageRedisService', 'RedisModuleStore']) {
    assert.equal(typeof pkg[name], 'function', name);
  }
});

test('TypeScript --module nodenext: ESM (.mts) and CommonJS (.cts) importers, and req.rateLimit on Express Request', () => {
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types', 'nodenext', 'tsconfig.json')], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test('TypeScript --module commonjs (node10 resolution, the "types" field) in a project that depends on the package', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-tsc-'));
  try {
    fs.mkdirSync(path.join(dir, 'node_modules', '@types'), { recursive: true });
    fs.symlinkSync(pkgDir, path.join(dir, 'node_modules', 'redis-ratelimit'));
    for (const dep of ['ioredis', '@types/node', '@types/express', 'express']) {
      fs.symlinkSync(path.join(pkgDir, 'node_modules', dep), path.join(dir, 'node_modules', dep));
    }
    fs.writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, noEmit: true, target: 'ES2022', module: 'commonjs', moduleResolution: 'node10', esModuleInterop: true, types: ['node'] }, files: ['app.ts'] }),
    );
    fs.writeFileSync(
      path.join(dir, 'app.ts'),
      `import Redis from 'ioredis';
import express from 'express';
import { RateLimit, rateLimit, RedisModuleStore, RateLimiterRedisModule, ThrottlerStorageRedisService, type Decision } from 'redis-ratelimit';
const redis = new Redis();
const app = express();
app.use(rateLimit({ client: redis, algorithm: 'period', limit: 5, period: '1m' }));
app.get('/', (req, res) => { const d: Decision | undefined = req.rateLimit; res.json(d); });
new RedisModuleStore({ client: redis });
new RateLimiterRedisModule({ storeClient: redis });
new ThrottlerStorageRedisService(redis);
export const check = (): Promise<Decision> => new RateLimit(redis).token('k', { capacity: 1, rate: 1, period: 1000 });
`,
    );
    const r = spawnSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.json')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

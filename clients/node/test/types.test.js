'use strict';
// The TypeScript declarations: a typed usage file compiles under `tsc --noEmit --strict`, and a
// file of wrong calls does not (each marked line is an error).
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const dir = path.join(__dirname, 'types');
const tsc = path.join(__dirname, '..', 'node_modules', 'typescript', 'bin', 'tsc');

function compile(file) {
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.json'), ...(file ? [] : [])], { encoding: 'utf8', cwd: dir });
  return r;
}

test('the typed usage file compiles (tsc --noEmit, strict)', () => {
  const r = compile();
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test('wrong calls are type errors', () => {
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tsconfig.json'), 'utf8'));
  cfg.files = ['bad-usage.ts'];
  const tmp = path.join(dir, 'tsconfig.bad.json');
  fs.writeFileSync(tmp, JSON.stringify(cfg));
  try {
    const r = spawnSync(process.execPath, [tsc, '-p', tmp], { encoding: 'utf8', cwd: dir });
    assert.notEqual(r.status, 0);
    const lines = new Set([...r.stdout.matchAll(/bad-usage\.ts\((\d+),/g)].map((m) => Number(m[1])));
    const marked = fs
      .readFileSync(path.join(dir, 'bad-usage.ts'), 'utf8')
      .split('\n')
      .map((l, i) => (/\/\/ (?!Must)/.test(l) && /\(/.test(l) ? i + 1 : 0))
      .filter(Boolean);
    for (const line of marked) assert.ok(lines.has(line), `line ${line} of bad-usage.ts should be a type error:\n${r.stdout}`);
  } finally {
    fs.rmSync(tmp, { force: true });
  }
});

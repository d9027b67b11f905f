// Reads mocha's JSON report of rate-limiter-flexible's suites and checks the issue's counts:
// all 94 tests reported, at least 74 passing, and every failure among the expected ones (the
// tests that read the stock implementation's raw string key or run a custom Lua script; see
// ../shared/peers/README-node.md). Prints one verdict line, then the details.
'use strict';
const fs = require('fs');
const path = require('path');

const [report, expectedFile] = process.argv.slice(2);
const r = JSON.parse(fs.readFileSync(report, 'utf8'));
const expected = new Set(
  fs.readFileSync(expectedFile, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')),
);
const id = (t) => `${path.basename(t.file || '')} | ${t.fullTitle}`;
const tests = r.tests || [];
const passes = r.passes || [];
const failures = r.failures || [];
const unexpected = failures.filter((f) => !expected.has(id(f)));
const ok = tests.length === 94 && passes.length >= 74 && unexpected.length === 0;
console.log(
  `${passes.length} passing, ${failures.length} failing, ${tests.length} reported (need 94 reported, >= 74 passing, failures only among the ${expected.size} raw-key/Lua tests)`,
);
for (const f of failures) console.log(`  ${expected.has(id(f)) ? 'expected' : 'UNEXPECTED'} failure: ${id(f)}${expected.has(id(f)) ? '' : `\n      ${(f.err && f.err.message) || ''}`}`);
process.exit(ok ? 0 : 1);

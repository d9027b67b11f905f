'use strict';
// The application's ACL user exactly as docs/operations.md ("The application's user") writes it
// runs everything the package does (issue 31, defect 11): the middleware on a server policy
// (RL.HIT, RL.POLICY GET for w) and on a limit of its own, the metrics collector (INFO, RL.TOP:
// ratelimit_up 1) and a permit block (COST size, then RL.REFUND). It cannot change a policy nor
// reach keys outside ~ratelimit:*. On Redis 7.0 the by-name line is used; on every later server
// both lines are.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Redis = require('ioredis');
const promClient = require('prom-client');
const { RateLimit, PermitBlock, rateLimit, registerRateLimitMetrics } = require('..');
const { startServer, info } = require('../testing/servers');

/** The `ACL SETUSER app …` lines of docs/operations.md's application user, by the comment above each. */
function documentedLines() {
  const doc = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'operations.md'), 'utf8');
  const section = doc.slice(doc.indexOf("### The application's user"));
  const block = /```\n([\s\S]*?)```/.exec(section)[1].split('\n');
  const lines = {};
  for (let i = 0; i + 1 < block.length; i++) {
    if (block[i].startsWith('#') && block[i + 1].startsWith('ACL SETUSER app ')) lines[block[i]] = block[i + 1];
  }
  const modern = Object.keys(lines).find((c) => /7\.2\+/.test(c));
  const old = Object.keys(lines).find((c) => /7\.0/.test(c));
  assert.ok(modern && old, `docs/operations.md lists the app user for 7.2+ and for 7.0: ${JSON.stringify(lines)}`);
  return { modern: lines[modern], old: lines[old] };
}

function run(mw, ip) {
  return new Promise((resolve) => {
    const headers = {};
    const res = { statusCode: 200, setHeader: (k, v) => (headers[k] = v), end: () => resolve({ status: res.statusCode, headers }) };
    mw({ ip, headers: {}, socket: {} }, res, (err) => resolve({ status: err ? 500 : 200, headers, err }));
  });
}

async function samples(registry) {
  const out = {};
  for (const line of (await registry.metrics()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

test('the documented application user runs the middleware, the collector and permit blocks', async () => {
  const server = await startServer();
  const admin = new Redis({ port: server.port });
  try {
    const version = (await info(server.port, 'server')).redis_version;
    const is70 = /^7\.0\./.test(version) && !(await info(server.port, 'server')).valkey_version;
    const { modern, old } = documentedLines();
    const adminRl = new RateLimit(admin);
    await adminRl.setPolicy('free', { algorithm: 'period', limit: 3, period: '1m' });
    for (const line of is70 ? [old] : [modern, old]) {
      await admin.call('ACL', 'DELUSER', 'app');
      const [, ...args] = line.split(/\s+/);
      assert.equal(await admin.call('ACL', ...args), 'OK', line);
      const password = /\s>(\S+)/.exec(line)[1];
      const app = new Redis({ port: server.port, username: 'app', password });
      try {
        await adminRl.resetPolicyStats();
        await admin.call('RL.TOP', 'RESET');
        const onPolicy = rateLimit({ client: app, policy: 'free', key: () => `acl-${line.length}` });
        const statuses = [];
        for (let i = 0; i < 4; i++) statuses.push((await run(onPolicy, '192.0.2.1')).status);
        assert.deepEqual(statuses, [200, 200, 200, 429], line);
        assert.equal((await run(onPolicy, '192.0.2.1')).headers['RateLimit-Policy'], '"free";q=3;w=60', 'RL.POLICY GET granted');
        const own = rateLimit({ client: app, algorithm: 'token', capacity: 2, rate: 1, period: '1m', prefix: 'ratelimit:own:' });
        assert.equal((await run(own, '192.0.2.2')).status, 200);

        const registry = new promClient.Registry();
        registerRateLimitMetrics(registry, app, { topKeys: 5 });
        const s = await samples(registry);
        assert.equal(s.ratelimit_up, 1, `${line}: INFO and RL.TOP granted`);
        assert.ok(s['ratelimit_decisions_total{command="hit",outcome="limited"}'] >= 2);
        assert.equal(s[`ratelimit_top_key_refused{key="ratelimit:acl-${line.length}"}`], 2);

        const key = `ratelimit:global:${line.length}`;
        const block = new PermitBlock(new RateLimit(app), key, { algorithm: 'token', capacity: 100, rate: 1, period: '1h' }, { size: 10 });
        for (let i = 0; i < 3; i++) assert.equal((await block.take()).allowed, true);
        await block.close(); // gives the 7 unused permits back: RL.REFUND
        assert.equal((await adminRl.info(key)).tokens, 97, 'the unused permits were refunded');

        // What the user may not do.
        await assert.rejects(app.call('RL.POLICY', 'SET', 'free', 'PERIOD', 1000, 60000), /NOPERM/);
        await assert.rejects(app.call('RL.TOKEN', 'other:key', 1, 1, 1000), /NOPERM/);
      } finally {
        app.disconnect();
      }
    }
  } finally {
    admin.disconnect();
    await server.stop();
  }
});

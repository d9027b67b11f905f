'use strict';
// make bench-clients-node: one Express app (app.js), the same limit (1000 per 60 s per key, keys
// drawn from KEYS), driven by autocannon, with six limiters, alternated per round and
// the median of ROUNDS rounds reported. Per limiter: HTTP requests/s and p99 latency, Redis
// server time per decision (INFO commandstats: the usec of the commands the client sent, a
// script's inner commands included in its EVALSHA), commands per decision, and bytes per limiter
// key (used_memory delta over the keys the run made). Writes the "## Node" section of
// bench/CLIENTS.md (the other sections are kept).
//   node bench.js <redis port> <CLIENTS.md path>
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const autocannon = require('autocannon');
const Redis = require('ioredis');

const [redisPort, outFile] = process.argv.slice(2);
const ROUNDS = Number(process.env.ROUNDS || 12);
const DURATION_S = Number(process.env.DURATION_S || 3);
const WARMUP_S = Number(process.env.WARMUP_S || 3);
const INPROC_N = Number(process.env.INPROC_N || 20000);
const { limiterFor } = require('./limiters');
const CONNECTIONS = Number(process.env.CONNECTIONS || 32);
const KEYS = Number(process.env.KEYS || 20000);

const VARIANTS = [
  { id: 'rlf-stock', label: "(a) rate-limiter-flexible `RateLimiterRedis` (stock Lua, ioredis)", peer: true },
  { id: 'erl-rate-limit-redis', label: '(b) express-rate-limit + rate-limit-redis (stock Lua, node-redis)', peer: true },
  { id: 'middleware', label: '(c) redis-ratelimit `rateLimit()` middleware (node-redis)' },
  { id: 'rlf-module', label: '(c) rate-limiter-flexible + `RateLimiterRedisModule` (ioredis)', stock: 'rlf-stock' },
  { id: 'rlf-module-node-redis', label: '(c) rate-limiter-flexible + `RateLimiterRedisModule` (node-redis)', stock: 'rlf-stock' },
  { id: 'erl-module-store', label: '(c) express-rate-limit + `RedisModuleStore` (node-redis)', stock: 'erl-rate-limit-redis' },
];

const redis = new Redis({ port: Number(redisPort) });
const CLK_TCK = Number(require('node:child_process').execSync('getconf CLK_TCK').toString().trim()) || 100;

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat. */
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // utime, stime (fields 14 and 15)
}
const SCRIPT_INNER = new Set(['set', 'incrby', 'incr', 'pttl', 'expire', 'pexpire', 'get', 'del', 'decr']);
const ADMIN = new Set(['info', 'config|resetstat', 'config', 'flushall', 'dbsize', 'ping', 'memory|usage', 'client|setinfo', 'client|setname', 'client', 'select', 'hello']);

function parseInfo(text) {
  const out = {};
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

async function commandStats() {
  const stats = parseInfo(await redis.info('commandstats'));
  const out = {};
  for (const [k, v] of Object.entries(stats)) {
    const m = /^cmdstat_(.+)$/.exec(k);
    if (!m) continue;
    out[m[1]] = { calls: Number(/calls=(\d+)/.exec(v)[1]), usec: Number(/usec=(\d+)/.exec(v)[1]) };
  }
  return out;
}

async function usedMemory() {
  return Number(parseInfo(await redis.info('memory')).used_memory);
}

function startApp(variant) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(__dirname, 'app.js'), variant, redisPort], { stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`app ${variant} did not start`)), 10000);
    child.stdout.on('data', (d) => {
      buf += d;
      const m = /listening (\d+)/.exec(buf);
      if (m) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]) });
      }
    });
    child.on('exit', (code) => reject(new Error(`app ${variant} exited ${code}`)));
  });
}

function load(port, seconds) {
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: `http://127.0.0.1:${port}`,
        connections: CONNECTIONS,
        duration: seconds,
        requests: [{ setupRequest: (req) => ({ ...req, path: `/?k=u${Math.floor(Math.random() * KEYS)}` }) }],
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
  });
}

async function runOnce(v, app) {
  await redis.flushall('SYNC'); // only this limiter's keys in the memory figure
  await redis.config('RESETSTAT');
  const mem0 = await usedMemory();
  const cpu0 = cpuSeconds(app.child.pid);
  const res = await load(app.port, DURATION_S);
  const appCpu = cpuSeconds(app.child.pid) - cpu0;
  const stats = await commandStats();
  const keys = await redis.dbsize();
  const mem1 = await usedMemory();
  const decisions = res['2xx'] + res.non2xx;
  let sentCalls = 0;
  let sentUsec = 0;
  let innerCalls = 0;
  const sentNames = [];
  for (const [name, s] of Object.entries(stats)) {
    if (ADMIN.has(name)) continue;
    if (SCRIPT_INNER.has(name) && (stats.evalsha || stats.eval)) {
      innerCalls += s.calls;
      continue;
    }
    sentCalls += s.calls;
    sentUsec += s.usec;
    if (s.calls >= decisions / 100) sentNames.push(name.toUpperCase()); // not a stray call from the previous run
  }
  return {
    rps: res.requests.average,
    appCpuUs: (appCpu * 1e6) / decisions,
    p99: res.latency.p99,
    decisions,
    refused: res.non2xx,
    errors: res.errors + res.timeouts,
    cmdsPerDecision: sentCalls / decisions,
    innerPerDecision: innerCalls / decisions,
    usecPerDecision: sentUsec / decisions,
    bytesPerKey: keys > 0 ? (mem1 - mem0) / keys : 0,
    keys,
    commands: sentNames.sort().join(', '),
  };
}

/**
 * The limiter alone, in this process: its middleware called with a minimal request/response
 * (no HTTP, no Express), CONNECTIONS calls in flight, INPROC_N decisions; CPU µs (user + system
 * of this process) per decision — what the limiter costs the application, without the noise
 * of the HTTP stack and the load generator.
 */
async function inProcess(mw) {
  await redis.flushall('SYNC');
  let i = 0;
  const one = () =>
    new Promise((resolve, reject) => {
      const headers = {};
      const req = { query: { k: `u${Math.floor(Math.random() * KEYS)}` }, ip: '127.0.0.1', headers: {}, method: 'GET', app: { get() {} } };
      const res = {
        headersSent: false,
        statusCode: 200,
        setHeader(k, v) { headers[k] = v; },
        getHeader(k) { return headers[k]; },
        append(k, v) { headers[k] = v; },
        on() {},
        status() { return this; },
        send() { resolve(); },
        end() { resolve(); },
      };
      mw(req, res, (err) => (err ? reject(err) : resolve()));
    });
  const worker = async () => {
    while (i++ < INPROC_N) await one();
  };
  const c0 = process.cpuUsage();
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / INPROC_N;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function replaceSection(file, heading, body) {
  let text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Client packages against the host libraries\' stock backends\n\n`make bench-clients`: one section per client package, each written by its own target.\n';
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim() === heading);
  const section = `${heading}\n\n${body.trim()}\n`;
  if (start === -1) {
    text = `${text.replace(/\n*$/, '\n\n')}${section}`;
  } else {
    let end = lines.findIndex((l, i) => i > start && /^## /.test(l));
    if (end === -1) end = lines.length;
    const rest = lines.slice(end).join('\n');
    text = `${lines.slice(0, start).join('\n')}\n${section}${rest ? `\n${rest}` : ''}`;
    text = text.replace(/^\n+/, '');
  }
  fs.writeFileSync(file, text.replace(/\n*$/, '\n'));
}

(async () => {
  const runs = Object.fromEntries(VARIANTS.map((v) => [v.id, []]));
  // Every app runs for the whole benchmark (started and warmed once); the load moves between them.
  const apps = {};
  try {
  for (const v of VARIANTS) {
    apps[v.id] = await startApp(v.id);
    await load(apps[v.id].port, WARMUP_S);
  }
  for (let round = 1; round <= ROUNDS; round++) {
    // each round starts one limiter further on (A B C D E, B C D E A, …): no limiter always runs first
    const order = VARIANTS.map((_, i) => VARIANTS[(i + round - 1) % VARIANTS.length]);
    for (const v of order) {
      const r = await runOnce(v, apps[v.id]);
      runs[v.id].push(r);
      process.stderr.write(`round ${round} ${v.id}: ${Math.round(r.rps)} req/s p99 ${r.p99} ms, app ${r.appCpuUs.toFixed(1)} us CPU/req, ${r.usecPerDecision.toFixed(2)} us/decision, ${r.cmdsPerDecision.toFixed(2)} cmds (${r.innerPerDecision.toFixed(2)} inside scripts), ${r.bytesPerKey.toFixed(1)} B/key, errors ${r.errors}\n`);
    }
  }
  } finally {
    for (const a of Object.values(apps)) {
      a.child.removeAllListeners('exit');
      a.child.kill('SIGTERM');
    }
  }
  const middlewares = {};
  for (const v of VARIANTS) {
    middlewares[v.id] = await limiterFor(v.id, redisPort);
    await inProcess(middlewares[v.id]); // warm-up
  }
  for (let round = 1; round <= ROUNDS; round++) {
    const order = VARIANTS.map((_, i) => VARIANTS[(i + round - 1) % VARIANTS.length]);
    for (const v of order) {
      runs[v.id][round - 1].limiterCpuUs = await inProcess(middlewares[v.id]);
    }
  }
  process.stderr.write(`in-process limiter CPU per decision (median): ${VARIANTS.map((v) => `${v.id} ${median(runs[v.id].map((r) => r.limiterCpuUs)).toFixed(2)} us`).join(', ')}\n`);
  const rows = VARIANTS.map((v) => {
    const rs = runs[v.id];
    return {
      ...v,
      rps: median(rs.map((r) => r.rps)),
      p99: median(rs.map((r) => r.p99)),
      appCpuUs: median(rs.map((r) => r.appCpuUs)),
      limiterCpuUs: median(rs.map((r) => r.limiterCpuUs)),
      usec: median(rs.map((r) => r.usecPerDecision)),
      cmds: median(rs.map((r) => r.cmdsPerDecision)),
      inner: median(rs.map((r) => r.innerPerDecision)),
      bytes: median(rs.map((r) => r.bytesPerKey)),
      keys: median(rs.map((r) => r.keys)),
      errors: rs.reduce((n, r) => n + r.errors, 0),
      commands: rs[0].commands,
    };
  });
  const peers = rows.filter((r) => r.peer);
  const ours = rows.filter((r) => !r.peer);
  const serverInfo = parseInfo(await redis.info('server'));
  const fmt = (n, d = 0) => n.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
  // The bars: the best peer by its median (lowest server time, highest requests/s, lowest app
  // CPU), then each of ours against that peer round by round, and the median of those ratios —
  // the machine's load drifts between rounds, much less within one.
  const bestBy = (field, pick) => peers.reduce((a, b) => (pick(rowOf(a, field), rowOf(b, field)) === rowOf(a, field) ? a : b));
  const rowOf = (p, field) => median(runs[p.id].map((r) => r[field]));
  const roundRatio = (id, field, peer) => median(runs[id].map((r, i) => r[field] / runs[peer.id][i][field]));
  const timePeer = bestBy('usecPerDecision', Math.min);
  const rpsPeer = bestBy('rps', Math.max);
  const cpuPeer = bestBy('appCpuUs', Math.min);
  const limPeer = bestBy('limiterCpuUs', Math.min);
  const bars = ours.map((r) => {
    const tRatio = roundRatio(r.id, 'usecPerDecision', timePeer);
    const hRatio = roundRatio(r.id, 'rps', rpsPeer);
    const cRatio = roundRatio(r.id, 'appCpuUs', cpuPeer);
    const lRatio = roundRatio(r.id, 'limiterCpuUs', limPeer);
    r.lRatio = lRatio;
    r.tRatio = tRatio;
    r.hRatio = hRatio;
    r.cRatio = cRatio;
    const stock = r.stock ? peers.find((p) => p.id === r.stock) : null;
    const vsStock = stock
      ? ` Against its own stock pairing ${stock.label.slice(0, 3)}: server time ${roundRatio(r.id, 'usecPerDecision', stock).toFixed(2)}×, HTTP throughput ${roundRatio(r.id, 'rps', stock).toFixed(2)}×.`
      : '';
    return `- ${r.label.replace(/^\(c\) /, '')}: server time ${tRatio.toFixed(3)}× the best Lua peer's (bar ≤ 0.5: ${tRatio <= 0.5 ? 'met' : 'NOT met'}); HTTP throughput ${hRatio.toFixed(3)}× the best peer's (bar ≥ 1: ${hRatio >= 1 ? 'met' : 'NOT met'}); app CPU per request ${cRatio.toFixed(2)}× the leanest peer's; the limiter's own CPU per decision ${lRatio.toFixed(2)}× the leanest peer's.${vsStock}`;
  });
  const table = [
    '| limiter | commands sent per decision | Redis server time per decision | HTTP requests/s | p99 latency | app CPU per request | limiter CPU per decision (in-process) | bytes per limiter key |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.label} | ${r.cmds.toFixed(2)} (${r.commands}${r.inner ? `; ${r.inner.toFixed(2)} more inside the script` : ''}) | ${r.usec.toFixed(2)} µs${r.peer ? '' : ` (${r.tRatio.toFixed(2)}×)`} | ${fmt(r.rps)}${r.peer ? '' : ` (${r.hRatio.toFixed(2)}×)`} | ${fmt(r.p99)} ms | ${r.appCpuUs.toFixed(1)} µs${r.peer ? '' : ` (${r.cRatio.toFixed(2)}×)`} | ${r.limiterCpuUs.toFixed(2)} µs${r.peer ? '' : ` (${r.lRatio.toFixed(2)}×)`} | ${r.bytes.toFixed(1)} |`,
    ),
  ];
  const when = new Date().toISOString().slice(0, 10);
  const body = `
\`make bench-clients-node\` (${when}; ${os.cpus().length} vCPUs, Node ${process.version}, redis-server ${serverInfo.redis_version}; median of ${ROUNDS} rounds; the ${VARIANTS.length} apps run side by side for the whole benchmark, warmed ${WARMUP_S} s each, and the load moves between them: ${DURATION_S} s of autocannon with ${CONNECTIONS} connections per limiter per round, the limiters alternated within a round and each round starting with the next one). One Express 5 app (\`clients/node/bench/app.js\`), the same limit for every limiter — 1 000 requests per 60 s fixed window per key, the key drawn at random from ${fmt(KEYS)} per request — so every request is one limiting decision. Server time: the \`usec\` of the commands the client sent (INFO commandstats; a script's inner commands run inside its EVALSHA), divided by the decisions. Bytes per key: \`used_memory\` growth over the keys the run created (about ${fmt(median(rows.map((r) => r.keys)))}), TTL included. Ratios in the (c) rows: against the best peer by median (server time: ${timePeer.id}; requests/s: ${rpsPeer.id}; app CPU: ${cpuPeer.id}; limiter CPU: ${limPeer.id}), taken round by round (the same round's run of that peer) and then the median over the rounds; the bars are those ratios.

${table.join('\n')}

${bars.join('\n')}

Refused requests: none by design (the limit is not reached); errors across all runs: ${rows.reduce((n, r) => n + r.errors, 0)}. The HTTP figures are bounded by the single Node process serving Express on a 2-vCPU machine shared with redis-server, the load generator and whatever else runs there, so requests/s swing from run to run; the app's CPU time per request (user + system of the app process, /proc) is steadier, and the in-process column isolates the limiter: its Express middleware called ${fmt(INPROC_N)} times per round in the benchmark's own process with a minimal request and response (${CONNECTIONS} in flight, no HTTP), CPU µs of that process per decision. The server-time column is what each limiter costs Redis.
`;
  replaceSection(outFile, '## Node', body);
  process.stdout.write(`${table.join('\n')}\n\n${bars.join('\n')}\n`);
  redis.disconnect();
  process.exit(0); // the in-process limiters' clients are still connected
})().catch((err) => {
  console.error(err);
  process.exit(1);
});

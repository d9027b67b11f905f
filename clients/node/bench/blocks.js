'use strict';
// make bench-blocks: one hot key, 8 client processes (PermitBlock over ioredis), one server.
//   node bench/blocks.js <port> <server pid> <CLIENTS.md path>
// For block sizes 1, 10 and 100:
//   throughput: a token bucket that never binds; decisions/s of all processes together, and the
//     server's CPU time (/proc/<pid>/stat utime + stime) per decision;
//   binding: a fixed pool (token bucket of POOL permits refilled 1/h) drained by all processes:
//     over-admission = admitted − (POOL − tokens left after every close()), counted from the
//     server's side (must be 0), and the peak under-use: in 5 ms bins, the permits the other
//     processes held while one was refused, against the bound processes × blocks × size.
// Writes the "## Permit blocks" section of bench/CLIENTS.md (the other sections are kept).
const { fork } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');

const PROCESSES = 8;
const CONCURRENCY = 16; // callers awaiting take() at once in each process
const SECONDS = Number(process.env.BLOCKS_SECONDS || 3);
const SIZES = [1, 10, 100];
const POOL = 20000;
const BIN_MS = 5;

if (process.argv[2] === 'worker') {
  worker(JSON.parse(process.argv[3])).then(
    (r) => process.send(r, () => process.exit(0)),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
} else {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}

async function worker({ port, key, limit, size, mode, startAt, stopAt }) {
  const Redis = require('ioredis');
  const { RateLimit, PermitBlock } = require('..');
  const redis = new Redis({ port, host: '127.0.0.1' });
  const block = new PermitBlock(new RateLimit(redis), key, limit, { size, lifetime: '1s' });
  const heldBins = new Map(); // bin → max held after a decision in it
  const refusedBins = new Set();
  let admitted = 0;
  let refused = 0;
  await block.take().then((d) => d.allowed && admitted++); // connect before the start
  while (Date.now() < startAt) await new Promise((r) => setTimeout(r, 1));
  const loop = async () => {
    let misses = 0;
    while (Date.now() < stopAt) {
      const d = await block.take();
      const bin = Math.floor(Date.now() / BIN_MS);
      if (d.allowed) {
        admitted++;
        misses = 0;
      } else {
        refused++;
        refusedBins.add(bin);
        if (mode === 'binding' && ++misses > 50) break; // the pool is spent
      }
      if (mode === 'binding') heldBins.set(bin, Math.max(heldBins.get(bin) || 0, block.held));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  await block.close();
  redis.disconnect();
  return { admitted, refused, stats: block.stats, held: [...heldBins], refusedBins: [...refusedBins] };
}

function cpuTicks(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime + stime (fields 14, 15)
}

function run(args) {
  return Promise.all(
    Array.from({ length: PROCESSES }, () => new Promise((resolve, reject) => {
      const child = fork(__filename, ['worker', JSON.stringify(args)]);
      child.on('message', resolve);
      child.on('exit', (code) => code !== 0 && reject(new Error(`worker exited ${code}`)));
    })),
  );
}

async function main() {
  const [port, pid, outFile] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4]];
  const Redis = require('ioredis');
  const redis = new Redis({ port, host: '127.0.0.1' });
  const hz = 100; // USER_HZ on Linux
  const rows = [];
  for (const size of SIZES) {
    // throughput: a limit that never binds
    const key = `blocks:open:${size}`;
    const limit = { algorithm: 'token', capacity: 1e12, rate: 1e12, period: '1s' };
    const startAt = Date.now() + 1500;
    const stopAt = startAt + SECONDS * 1000;
    const t0 = cpuTicks(pid);
    const results = await run({ port, key, limit, size, mode: 'open', startAt, stopAt });
    const ticks = cpuTicks(pid) - t0;
    const decisions = results.reduce((n, r) => n + r.admitted + r.refused, 0);
    const calls = results.reduce((n, r) => n + r.stats.calls + r.stats.refunds, 0);

    // binding: a pool drained by all
    const pkey = `blocks:pool:${size}`;
    const plimit = { algorithm: 'token', capacity: POOL, rate: 1, period: '1h' };
    const pStart = Date.now() + 1500;
    const presults = await run({ port, key: pkey, limit: plimit, size, mode: 'binding', startAt: pStart, stopAt: pStart + 20000 });
    const tokensLeft = Number((await redis.call('RL.INFO', pkey)).reduce((v, x, i, a) => (a[i - 1] === 'tokens' ? x : v), 0));
    const consumed = POOL - tokensLeft;
    const admitted = presults.reduce((n, r) => n + r.admitted, 0);
    let peak = 0;
    const heldBy = presults.map((r) => new Map(r.held));
    presults.forEach((r, i) => {
      for (const bin of r.refusedBins) {
        let idle = 0;
        heldBy.forEach((m, j) => {
          if (j !== i) idle += m.get(bin) || 0;
        });
        peak = Math.max(peak, idle);
      }
    });
    rows.push({
      size,
      perSec: decisions / SECONDS,
      cpuUsPerDecision: ((ticks / hz) * 1e6) / decisions,
      callsPerDecision: calls / decisions,
      overAdmission: Math.max(0, admitted - consumed),
      admitted,
      consumed,
      peak,
      bound: PROCESSES * 1 * size,
    });
    console.log(JSON.stringify(rows[rows.length - 1]));
  }
  redis.disconnect();
  const base = rows[0];
  const body = [
    `\`make bench-blocks\` (clients/node/bench/blocks.js, ${new Date().toISOString().slice(0, 10)}): one hot key, ${PROCESSES} Node`,
    `processes (PermitBlock over ioredis, ${CONCURRENCY} callers awaiting take() in each, lifetime 1 s, refillBelow 0`,
    `so one block per process), one server, loopback, ${os.cpus().length} cores shared by all. Throughput: a token bucket`,
    `that never binds, ${SECONDS} s per size; server CPU = its utime + stime from /proc over the run, per decision.`,
    `Binding: a pool of ${POOL} permits (token bucket refilled 1/h) drained by all; over-admission = admitted − (pool −`,
    `tokens left after every close()), from the server's RL.INFO; peak under-use = the most permits the other processes`,
    `held in a ${BIN_MS} ms bin in which one process was refused, against the bound processes × blocks × size.`,
    'Block size 1 is one module call per decision (what a client does without blocks).',
    '',
    '| block size | decisions/s | × size 1 | server CPU µs/decision | × size 1 | server calls/decision | over-admission (pool) | peak under-use | bound |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.size} | ${Math.round(r.perSec)} | ${(r.perSec / base.perSec).toFixed(2)} | ${r.cpuUsPerDecision.toFixed(2)} | ${(r.cpuUsPerDecision / base.cpuUsPerDecision).toFixed(3)} | ${r.callsPerDecision.toFixed(4)} | ${r.overAdmission} (${r.admitted} admitted, ${r.consumed} consumed) | ${r.peak} | ${r.bound} |`,
    ),
    '',
    `Issue 26's target for blocks of 100 (≥ 5 × the decisions/s of size 1 at ≤ 0.2 × its server CPU per decision, 0 over-admission): ${verdict(rows)}.`,
  ].join('\n');
  writeSection(outFile, '## Permit blocks', body);
}

function verdict(rows) {
  const [base, top] = [rows[0], rows[rows.length - 1]];
  const met = top.perSec >= 5 * base.perSec && top.cpuUsPerDecision <= 0.2 * base.cpuUsPerDecision && rows.every((r) => r.overAdmission === 0);
  return met ? 'met' : 'NOT met';
}

/** Replaces the section under `heading` (up to the next "## ") in `file`, or appends it. */
function writeSection(file, heading, body) {
  const text = fs.readFileSync(file, 'utf8');
  const section = `${heading}\n\n${body}\n`;
  const start = text.indexOf(`\n${heading}\n`);
  if (start === -1) return fs.writeFileSync(file, `${text.replace(/\n*$/, '\n\n')}${section}`);
  const next = text.indexOf('\n## ', start + heading.length + 2);
  fs.writeFileSync(file, text.slice(0, start + 1) + section + (next === -1 ? '' : text.slice(next)));
}

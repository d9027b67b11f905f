'use strict';
// The Node side of deploy/test/test_dashboard.py: an HTTP app limited by server policies through
// the package's middleware, with /metrics from registerRateLimitMetrics (prom-client). Listens on
// a free loopback port and prints it as the first line of stdout.
//   GET /p/<policy>   one request under the server policy <policy>, tenant from x-tenant
//   GET /metrics      Prometheus text format
// REDIS_PORT names the server. Run with NODE_PATH=clients/node/node_modules.
const http = require('node:http');
const path = require('node:path');
const Redis = require('ioredis');
const promClient = require('prom-client');
const { rateLimit, registerRateLimitMetrics } = require(path.join(__dirname, '..', '..', 'clients', 'node'));

const redis = new Redis({ port: Number(process.env.REDIS_PORT), host: '127.0.0.1' });
const registry = new promClient.Registry();
registerRateLimitMetrics(registry, redis, { topKeys: 10 });
const middlewares = new Map();
const middlewareOf = (policy) => {
  if (!middlewares.has(policy)) middlewares.set(policy, rateLimit({ client: redis, policy, key: (req) => req.headers['x-tenant'] }));
  return middlewares.get(policy);
};

const server = http.createServer((req, res) => {
  if (req.url === '/metrics') {
    registry.metrics().then((text) => {
      res.setHeader('Content-Type', registry.contentType);
      res.end(text);
    });
    return;
  }
  const m = /^\/p\/([\w-]+)$/.exec(req.url);
  if (!m) {
    res.statusCode = 404;
    res.end();
    return;
  }
  middlewareOf(m[1])(req, res, (err) => {
    res.statusCode = err ? 500 : 200;
    res.end(err ? 'error' : 'ok');
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => {
  redis.disconnect();
  server.close(() => process.exit(0));
});

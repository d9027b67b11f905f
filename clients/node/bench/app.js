'use strict';
// One Express app with the limiter named on the command line (limiters.js). Prints
// "listening <port>" once it serves.
//   node app.js <variant> <redis port>
const express = require('express');
const { limiterFor } = require('./limiters');

const [variant, redisPort] = process.argv.slice(2);

(async () => {
  const app = express();
  app.disable('x-powered-by');
  app.use(await limiterFor(variant, redisPort));
  app.get('/', (_req, res) => res.send('ok'));
  const srv = app.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${srv.address().port}\n`));
})().catch((err) => {
  console.error(err);
  process.exit(1);
});

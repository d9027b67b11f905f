// req.rateLimit is known to Express's Request (the package augments Express.Request).
import express from 'express';
import { Redis } from 'ioredis';
import { rateLimit, type Decision } from 'redis-ratelimit';

const app = express();
app.use(rateLimit({ client: new Redis(), algorithm: 'slide', limit: 10, window: '1m', timeout: 200, ipv6Subnet: 48 }));
app.get('/', (req, res) => {
  const d: Decision | undefined = req.rateLimit;
  res.json({ remaining: req.rateLimit?.remaining, allowed: d?.allowed });
});

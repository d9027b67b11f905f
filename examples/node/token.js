// RL.TOKEN from Node with ioredis.
//
//     node examples/node/token.js 127.0.0.1:6379
//
// Seven requests against a bucket of 5 tokens refilled 1 per minute: 5 admitted, 2 limited.
// tests/examples.rs runs it against a real server and checks the output.
"use strict";
const Redis = require("ioredis");

async function main(addr) {
  const [host, port] = [addr.slice(0, addr.lastIndexOf(":")), Number(addr.slice(addr.lastIndexOf(":") + 1))];
  const redis = new Redis({ host, port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  let admitted = 0;
  // readme-begin
  for (let i = 1; i <= 7; i++) {
    const [allowed, limit, remaining, retryMs, resetMs] = await redis.call(
      "RL.TOKEN", "api:key42", 5, 1, "1m"); // bucket of 5, +1 token per minute
    if (!allowed) {
      console.log(`${i} limited retry_after_ms=${retryMs}`); // HTTP 429, Retry-After
      continue;
    }
    admitted++;
    console.log(`${i} allowed remaining=${remaining} limit=${limit}`);
  }
  // readme-end
  console.log(`admitted ${admitted} of 7`);
  await redis.quit();
}

main(process.argv[2] || "127.0.0.1:6379").catch((err) => {
  console.error(err);
  process.exit(1);
});

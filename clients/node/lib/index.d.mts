// Type declarations of redis-ratelimit for ESM importers (lib/index.mjs): the same as the
// CommonJS ones, every export by name, and the whole package as the default export.
import * as pkg from './index.js';
export * from './index.js';
export default pkg;

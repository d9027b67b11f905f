// redis-ratelimit from ESM: every export of the CommonJS package by name (the names Node detects
// in index.js; the same objects, so `instanceof` holds across both), and the whole of it as the
// default export.
export * from './index.js';
export { default } from './index.js';

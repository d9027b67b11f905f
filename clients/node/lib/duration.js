'use strict';
/**
 * Durations, as the module reads them: a whole number of milliseconds, or a string of digits
 * with an optional unit `ms`, `s`, `m`, `h` or `d` ("1500", "1500ms", "2s", "1m", "24h", "1d").
 * The client converts every duration to whole milliseconds before it sends a command, so a
 * malformed value fails in the caller's process with a TypeError, not on the server.
 */

const UNIT_MS = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 };
const DURATION_RE = /^(\d+)\s*(ms|s|m|h|d)?$/i;

/** The longest period the module accepts: ten years (3650 days). */
const TEN_YEARS_MS = 315360000000;

/**
 * A value as it reads in an error message: NaN, Infinity, -1, 1.5, 10n, "soon", undefined,
 * null, an object's JSON (never a JSON error of its own: a BigInt or a cycle inside).
 * @param {unknown} value
 * @returns {string}
 */
function show(value) {
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === undefined || value === null || typeof value === 'boolean') return String(value);
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v)) || String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** A BigInt within the safe integer range as a number (anything else unchanged). */
function fromBigInt(value) {
  if (typeof value === 'bigint' && value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(value);
  return value;
}

/**
 * Whole milliseconds of a duration given as a number of ms or a string with a unit.
 * @param {number|string} value
 * @param {string} name  the option's name, for the error message
 * @returns {number}
 */
function toMs(value, name) {
  if (value === undefined || value === null) throw new TypeError(`${name} is required: a duration like 1500 (ms), "2s", "1m" (got ${show(value)})`);
  value = fromBigInt(value);
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value) && value >= 0) return value;
  } else if (typeof value === 'string') {
    const m = DURATION_RE.exec(value.trim());
    if (m) {
      const ms = Number(m[1]) * UNIT_MS[(m[2] || 'ms').toLowerCase()];
      if (Number.isSafeInteger(ms)) return ms;
    }
  }
  throw new TypeError(
    `${name} must be a duration: a whole number of milliseconds or a string like "1500ms", "2s", "1m", "24h", "1d" (got ${show(value)})`,
  );
}

/**
 * A count (capacity, rate, limit, cost …): a non-negative safe integer, or a string of digits.
 * @param {number|string} value
 * @param {string} name
 * @returns {number}
 */
function toCount(value, name) {
  if (value === undefined || value === null) throw new TypeError(`${name} is required: a whole number (got ${show(value)})`);
  value = fromBigInt(value);
  if (typeof value === 'string' && /^\d+$/.test(value)) value = Number(value);
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  throw new TypeError(`${name} must be a whole number (got ${show(value)})`);
}

module.exports = { toMs, toCount, show, TEN_YEARS_MS };

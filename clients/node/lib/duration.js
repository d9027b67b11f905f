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
 * Whole milliseconds of a duration given as a number of ms or a string with a unit.
 * @param {number|string} value
 * @param {string} name  the option's name, for the error message
 * @returns {number}
 */
function toMs(value, name) {
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
    `${name} must be a duration: a whole number of milliseconds or a string like "1500ms", "2s", "1m", "24h", "1d" (got ${JSON.stringify(value)})`,
  );
}

/**
 * A count (capacity, rate, limit, cost …): a non-negative safe integer, or a string of digits.
 * @param {number|string} value
 * @param {string} name
 * @returns {number}
 */
function toCount(value, name) {
  if (typeof value === 'string' && /^\d+$/.test(value)) value = Number(value);
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  throw new TypeError(`${name} must be a whole number (got ${JSON.stringify(value)})`);
}

module.exports = { toMs, toCount, TEN_YEARS_MS };

'use strict';
/**
 * The middleware's default key: the client's address, as one client is seen from outside.
 *
 * - An IPv4-mapped IPv6 address (`::ffff:203.0.113.7`, what a dual-stack socket reports for an
 *   IPv4 client) is the IPv4 address: the same client whether it came over v4 or v6.
 * - An IPv6 address is grouped by its /56 prefix (as express-rate-limit does): a single
 *   subscriber is usually given a /64 or a /56 and can rotate freely inside it, so the full
 *   address would let one client walk past any limit. The key is the prefix in CIDR form,
 *   `2001:db8:1234:5600::/56`.
 */
const net = require('node:net');

/** The eight 16-bit groups of an IPv6 address (no zone), or null. */
function groupsOf(address) {
  // an embedded IPv4 tail (::ffff:203.0.113.7) is the last two groups
  const text = address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_m, a, b, c, d) => `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`);
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const parse = (s) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const head = parse(halves[0]);
  const rest = halves.length === 2 ? parse(halves[1]) : [];
  const fill = 8 - head.length - rest.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return null;
  const groups = [...head, ...new Array(halves.length === 2 ? fill : 0).fill(0), ...rest];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

/**
 * The key of a client address: IPv4 as is, IPv4-mapped IPv6 as IPv4, other IPv6 as its
 * `/subnet` prefix (`subnet` false or 128: the full address, normalised).
 * @param {string} address
 * @param {number|false} [subnet]  default 56
 * @returns {string}
 */
function addressKey(address, subnet = 56) {
  if (typeof address !== 'string' || address === '') return address;
  const bare = address.replace(/%.*$/, ''); // a zone id (fe80::1%eth0) is local detail
  if (net.isIPv4(bare)) return bare;
  if (!net.isIPv6(bare)) return address;
  const g = groupsOf(bare);
  if (!g) return address;
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
    return `${g[6] >> 8}.${g[6] & 0xff}.${g[7] >> 8}.${g[7] & 0xff}`;
  }
  const bits = subnet === false || subnet === undefined || subnet === null ? 128 : subnet;
  if (!Number.isInteger(bits) || bits < 1 || bits > 128) throw new TypeError(`ipv6Subnet must be a whole number 1 … 128 or false (got ${bits})`);
  const masked = g.map((group, i) => {
    const keep = Math.max(0, Math.min(16, bits - 16 * i));
    return keep === 0 ? 0 : group & (0xffff << (16 - keep)) & 0xffff;
  });
  // shortest form: the longest run of zero groups (two or more) becomes "::"
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (masked[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && masked[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = masked.map((x) => x.toString(16));
  const text = best === -1 ? hex.join(':') : `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
  return bits === 128 ? text : `${text}/${bits}`;
}

module.exports = { addressKey };

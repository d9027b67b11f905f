'use strict';
/**
 * Redis Cluster hash slots: CRC16 (XMODEM) of the key, or of its hash tag — the part between
 * the first `{` and the next `}` when that part is not empty — modulo 16384.
 */

const TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let crc = i << 8;
  for (let b = 0; b < 8; b++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  TABLE[i] = crc;
}

function crc16(bytes) {
  let crc = 0;
  for (let i = 0; i < bytes.length; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ bytes[i]) & 0xff];
  return crc;
}

/**
 * The cluster slot of a key (string or Buffer).
 * @param {string|Buffer} key
 * @returns {number}
 */
function keySlot(key) {
  let bytes = Buffer.isBuffer(key) ? key : Buffer.from(String(key));
  const open = bytes.indexOf(0x7b); // {
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  return crc16(bytes) % 16384;
}

module.exports = { keySlot };

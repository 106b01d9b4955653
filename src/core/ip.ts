/**
 * IP address literals, checked without `node:net` so that `core` stays free
 * of I/O modules. Both functions agree with `net.isIP` (the tests compare
 * them on generated input).
 */

const GROUP = /^[0-9A-Fa-f]{1,4}$/;

/** True for a dotted-quad IPv4 address: four decimal octets in [0, 255], no leading zeros. */
export function isIPv4(text: string): boolean {
  // A character loop, not split + regex: every membership change re-validates every address.
  const n = text.length;
  let i = 0;
  for (let octet = 1; ; octet++) {
    const start = i;
    let value = 0;
    while (i < n && i - start < 4) {
      const c = text.charCodeAt(i);
      if (c < 48 || c > 57) break;
      value = value * 10 + (c - 48);
      i++;
    }
    const digits = i - start;
    if (digits === 0 || digits > 3 || value > 255 || (digits > 1 && text.charCodeAt(start) === 48)) return false;
    if (i === n) return octet === 4;
    if (octet === 4 || text.charCodeAt(i) !== 46) return false;
    i++;
  }
}

/** True for an IPv6 address (RFC 4291 text forms: `::` once at most, an embedded IPv4 tail), without a zone id. */
export function isIPv6(text: string): boolean {
  const halves = text.split('::');
  if (halves.length > 2) return false;
  const groups = (half: string): string[] => (half === '' ? [] : half.split(':'));
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  const all = [...head, ...tail];
  let count = all.length;
  // Only the very last group of the text may be an IPv4 tail (not one before "::").
  const last = halves.length === 2 ? tail[tail.length - 1] : head[head.length - 1];
  if (last?.includes('.')) {
    if (!isIPv4(last)) return false;
    all.pop();
    count += 1; // an IPv4 tail takes two groups
  }
  if (!all.every((g) => GROUP.test(g))) return false;
  return halves.length === 2 ? count <= 7 : count === 8;
}

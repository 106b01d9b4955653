/**
 * The one Lua script every write goes through. Redis runs a script
 * atomically, so the version bump, the snapshot write and the notice are one
 * step: no reader can receive a notice whose snapshot is not stored, and no
 * two writers can both "bump 6 → 7".
 *
 * KEYS[1]  snapshot key
 * KEYS[2]  notice channel (declared as a key: in a Redis Cluster it hashes to
 *          the snapshot key's slot through the `{cluster}` tag, and a sharded
 *          channel must live on the node that runs the script)
 * ARGV[1]  the publish command: PUBLISH (one server, Sentinel) or SPUBLISH
 *          (Cluster: sharded pub/sub, delivered only inside the slot's shard)
 * ARGV[2]  document JSON (already validated by the caller; never parsed here)
 * ARGV[3]  expected current version, or "" for any (0 = the key must not exist)
 * ARGV[4]  requested new version (decimal digits, <= ARGV[6]), or "" for current + 1
 * ARGV[5]  a fresh lineage id (32 hex digits), used only when no lineage is stored
 * ARGV[6]  the largest version, 2^53 − 1, as decimal digits
 * ARGV[7]  a floor for "current + 1" (decimal digits, <= ARGV[6]), or "": the
 *          highest version this publisher wrote; applied only when the
 *          stored lineage is ARGV[8]. After a failover that lost writes
 *          (asynchronous replication), the stored version is below versions
 *          readers already applied; writing max(current, floor) + 1 puts the
 *          next version above every version this publisher ever published,
 *          so those readers take it instead of ignoring it as "not newer".
 * ARGV[8]  the lineage ARGV[7] belongs to, or ""
 * ARGV[9]  delta ops JSON (delta.ts, computed against the document read at
 *          version ARGV[3]), or "" to publish the whole snapshot
 * ARGV[10] the digest of ARGV[2] (40 hex digits), with ARGV[9]
 * ARGV[11] the lineage of the document the ops were computed against, with ARGV[9]
 *
 * The notice is the delta `{"version":N,"lineage":L,"base":B,"ops":...,"digest":...}`
 * only when it is exact: ops given, the expected version matched (so B, the
 * stored version, is the one the ops were computed against) and the stored
 * lineage is ARGV[11]; otherwise it is the whole snapshot, as before delta
 * notices. The snapshot key always holds the whole snapshot.
 *
 * Replies are strings, never Lua numbers, so nothing is rounded on the way
 * out (ioredis would read a large integer reply as an inexact JS number):
 * {"1", newVersion, lineage, "delta" | "full"} on success, {"0", currentVersion} when the
 * expected version does not match (the caller re-reads and retries), and an
 * error reply otherwise, with
 * nothing written:
 *   POISE_STALE <requested> <current>   the requested version is not newer
 *   POISE_CEILING <current>             current + 1 would leave [0, 2^53 − 1]
 *   POISE_RANGE <requested>             the requested version is above 2^53 − 1
 *   POISE_MALFORMED <reason>            the stored value is not one this script wrote
 * The current version and lineage are read from the stored value's fixed
 * prefix, which only this script writes.
 *
 * Lua numbers are doubles: every integer up to 2^53 is exact, so the ceiling
 * is checked before `cur + 1` (2^53 − 1 + 1 is still exact; anything after
 * it would round), and versions are written back from their digit strings.
 */
export const WRITE_SCRIPT = `
local max = tonumber(ARGV[6])
local cur = 0
local curText = '0'
local lineage = ARGV[5]
local stored = nil
local old = redis.call('GET', KEYS[1])
if old then
  local v = string.match(old, '^{"version":(%d+),')
  if v then
    cur = tonumber(v)
    curText = v
    local l = string.match(old, '^{"version":%d+,"lineage":"(%x+)",')
    if l then
      lineage = l
      stored = l
    end
  elseif ARGV[4] == '' then
    return redis.error_reply('POISE_MALFORMED the snapshot key holds a value this script did not write; apply a document with an explicit version to replace it')
  end
end
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= cur then
  return {'0', curText}
end
local nvText
if ARGV[4] ~= '' then
  local nv = tonumber(ARGV[4])
  if nv > max then
    return redis.error_reply('POISE_RANGE ' .. ARGV[4])
  end
  if nv <= cur then
    return redis.error_reply('POISE_STALE ' .. ARGV[4] .. ' ' .. curText)
  end
  nvText = ARGV[4]
else
  local base = cur
  if ARGV[7] ~= '' and ARGV[8] == lineage and old and tonumber(ARGV[7]) > cur then
    base = tonumber(ARGV[7])
  end
  if base >= max then
    return redis.error_reply('POISE_CEILING ' .. string.format('%d', base))
  end
  nvText = string.format('%d', base + 1)
end
local payload = '{"version":' .. nvText .. ',"lineage":"' .. lineage .. '","document":' .. ARGV[2] .. '}'
redis.call('SET', KEYS[1], payload)
if ARGV[9] ~= '' and ARGV[3] ~= '' and cur >= 1 and stored == ARGV[11] then
  redis.call(ARGV[1], KEYS[2], '{"version":' .. nvText .. ',"lineage":"' .. lineage .. '","base":' .. curText .. ',"ops":' .. ARGV[9] .. ',"digest":"' .. ARGV[10] .. '"}')
  return {'1', nvText, lineage, 'delta'}
end
redis.call(ARGV[1], KEYS[2], payload)
return {'1', nvText, lineage, 'full'}
`;

/**
 * The one Lua script every write goes through. Redis runs a script
 * atomically, so the version bump, the snapshot write and the notice are one
 * step: no reader can receive a notice whose snapshot is not stored, and no
 * two writers can both "bump 6 → 7".
 *
 * KEYS[1]  snapshot key
 * ARGV[1]  channel
 * ARGV[2]  document JSON (already validated by the caller; never parsed here)
 * ARGV[3]  expected current version, or "" for any (0 = the key must not exist)
 * ARGV[4]  requested new version, or "" for current + 1
 *
 * Returns {1, newVersion} on success, {0, currentVersion} when the expected
 * version does not match (the caller re-reads and retries), and an error
 * reply POISE_STALE / POISE_MALFORMED otherwise. The current version is read
 * from the stored value's fixed prefix, which only this script writes.
 */
export const WRITE_SCRIPT = `
local cur = 0
local old = redis.call('GET', KEYS[1])
if old then
  local v = string.match(old, '^{"version":(%d+),')
  if v then
    cur = tonumber(v)
  elseif ARGV[4] == '' then
    return redis.error_reply('POISE_MALFORMED the snapshot key holds a value this script did not write; apply a document with an explicit version to replace it')
  end
end
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= cur then
  return {0, cur}
end
local nv = cur + 1
if ARGV[4] ~= '' then
  nv = tonumber(ARGV[4])
  if nv <= cur then
    return redis.error_reply('POISE_STALE ' .. string.format('%d', nv) .. ' ' .. string.format('%d', cur))
  end
end
local payload = '{"version":' .. string.format('%d', nv) .. ',"document":' .. ARGV[2] .. '}'
redis.call('SET', KEYS[1], payload)
redis.call('PUBLISH', ARGV[1], payload)
return {1, nv}
`;

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
 * ARGV[12] optional: a fencing token (decimal digits) of the fleet watcher
 *          lease (redis-lease.ts), with KEYS[3] its lease key. The write goes
 *          ahead only while that lease is held under exactly this token: a
 *          watcher that stalled past its lease (a stopped process, a long GC
 *          pause) and publishes late is refused, since the next holder's token
 *          is higher and a lapsed lease holds none. Callers that pass no
 *          ARGV[12] (every publisher but the fleet watcher's) are not checked.
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
 *   POISE_FENCED <token> <held>         the lease is not held under ARGV[12] (held: the token it is held under, or "none")
 * The current version and lineage are read from the stored value's fixed
 * prefix, which only this script writes.
 *
 * Lua numbers are doubles: every integer up to 2^53 is exact, so the ceiling
 * is checked before `cur + 1` (2^53 − 1 + 1 is still exact; anything after
 * it would round), and versions are written back from their digit strings.
 */
export const WRITE_SCRIPT = `
if ARGV[12] and ARGV[12] ~= '' then
  local holder = redis.call('GET', KEYS[3])
  local held = holder and string.match(holder, '^(%d+):') or 'none'
  if held ~= ARGV[12] then
    return redis.error_reply('POISE_FENCED ' .. ARGV[12] .. ' ' .. held)
  end
end
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

/**
 * The fleet connection budget's one script (redis-connection-budget.ts): a
 * process renews its lease and takes its share of every backend it routes
 * to, in one atomic step.
 *
 * KEYS[1]  the cluster's budget hash (redis-keys.ts, `budgetKey`), fields
 *          `p:<proc>` (the process's lease deadline, Redis server ms),
 *          `s:<proc>:<backend>` (the share it holds),
 *          `d:<proc>:<backend>` (its demand at its last round),
 *          `t` (the server time of the last call) and `f` (the end of the
 *          fence, server ms)
 * ARGV[1]  the process id (hex)
 * ARGV[2]  the lease TTL, ms
 * ARGV[3]  the budget per backend: `limitPerBackend − reserve`
 * ARGV[4]  "1" when the process held shares from an earlier round, else "0"
 * ARGV[5]  the number of backends that follow, then for each four values:
 *          backend id, demand (connections in use + refused at the share
 *          since the last round), connections in use, and the share the
 *          process holds now (in its LoadTable; 0 for none)
 *
 * The time is the server's (`TIME`), so processes need not agree on clocks.
 * Leases past their deadline are removed with every field of theirs: a
 * crashed process's shares return after the TTL. A backend's budget B is
 * split among the live processes that route to it by demand, max-min fair
 * (water-filling in ascending demand, each demand counted as at least 1, so
 * every process gets ≥ 1 when B allows), what no demand takes spread
 * evenly; ties and remainders go by process id. The caller's target is then
 * capped by what the other live processes hold now:
 *
 *     grant = max(0, min(target, B − Σ others' shares))
 *
 * and it stores max(grant, in use, the share it holds now) as its share — a
 * process cannot hand back connections it still holds, nor a share it has
 * not yet seen shrink: a reply lost to a deadline leaves the process on its
 * old share, so a shrink counts from the process's next round, which
 * reports the new share — so Σ shares ≤ B holds after every call (the
 * others only grow into capacity that was handed back at their own rounds).
 *
 * The fence. Outside Redis every process keeps the shares it holds while
 * Redis is away; inside, its lease may expire meanwhile (a stopped or
 * paused Redis answers the queued rounds at once when it resumes, with a
 * clock that jumped) or vanish (a restart or flush). So when the call finds
 *
 * - the hash gone while the caller held shares (ARGV[4]), or
 * - more than TTL / 2 since the last call (each live process calls every
 *   TTL / 3, so the server was not answering) while a lease was live at
 *   the last call,
 *
 * it raises a fence for one TTL (`f = now + TTL`): until then no lease
 * expires and every grant is capped at the share the caller holds now, so
 * nobody grows until every live process has had one full TTL to renew and
 * report what it holds. A gap of at most TTL / 2 cannot have expired a
 * renewing process's lease (its last renewal was at most TTL / 3 before).
 *
 * Replies strings: {live processes, this process's rank among them by id
 * (0-based: its aperture coordinate), then one grant per backend, in order}.
 */
export const BUDGET_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me, ttl, budget, heldBefore, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local h = redis.call('HGETALL', KEYS[1])
local last, fence, deadline = nil, 0, {}
for i = 1, #h, 2 do
  local p = string.match(h[i], '^p:(%x+)$')
  if p then
    deadline[p] = tonumber(h[i + 1])
  elseif h[i] == 't' then
    last = tonumber(h[i + 1])
  elseif h[i] == 'f' then
    fence = tonumber(h[i + 1])
  end
end
local raise = false
if last == nil then
  raise = heldBefore == '1'
elseif now - last > ttl / 2 then
  for p, d in pairs(deadline) do
    if d > last then raise = true end
  end
end
if raise then fence = now + ttl end
local fenced = now < fence
local live, liveIds = {}, {}
local del = {}
for p, d in pairs(deadline) do
  if p == me or d > now or fenced then
    live[p] = true
  else
    del[#del + 1] = 'p:' .. p
  end
end
live[me] = true
local demand, held = {}, {}
for i = 1, #h, 2 do
  local kind, p, b = string.match(h[i], '^(%a):(%x+):(.*)$')
  if kind then
    if (not live[p]) or p == me then
      del[#del + 1] = h[i]
    elseif kind == 'd' then
      demand[b] = demand[b] or {}
      demand[b][p] = tonumber(h[i + 1])
    elseif kind == 's' then
      held[b] = held[b] or {}
      held[b][p] = tonumber(h[i + 1])
    end
  end
end
for i = 1, #del, 1000 do
  redis.call('HDEL', KEYS[1], unpack(del, i, math.min(i + 999, #del)))
end
redis.call('HSET', KEYS[1], 'p:' .. me, string.format('%d', now + ttl), 't', string.format('%d', now), 'f', string.format('%d', fence))
for p in pairs(live) do liveIds[#liveIds + 1] = p end
table.sort(liveIds)
local rank = 0
for i = 1, #liveIds do if liveIds[i] == me then rank = i - 1 end end
local out = {tostring(#liveIds), tostring(rank)}
for k = 0, n - 1 do
  local b = ARGV[6 + 4 * k]
  local d = tonumber(ARGV[7 + 4 * k])
  local inUse = tonumber(ARGV[8 + 4 * k])
  local mine = tonumber(ARGV[9 + 4 * k])
  local dem = demand[b] or {}
  dem[me] = d
  local ids = {}
  for p in pairs(dem) do ids[#ids + 1] = p end
  table.sort(ids, function(x, y)
    local dx, dy = math.max(dem[x], 1), math.max(dem[y], 1)
    if dx ~= dy then return dx < dy end
    return x < y
  end)
  local alloc, left = {}, budget
  for i = 1, #ids do
    local fair = math.floor(left / (#ids - i + 1))
    local a = math.min(math.max(dem[ids[i]], 1), fair)
    alloc[ids[i]] = a
    left = left - a
  end
  if left > 0 then
    table.sort(ids)
    local each, extra = math.floor(left / #ids), left % #ids
    for i = 1, #ids do
      alloc[ids[i]] = alloc[ids[i]] + each + ((i <= extra) and 1 or 0)
    end
  end
  local others = 0
  for p, s in pairs(held[b] or {}) do
    if p ~= me then others = others + s end
  end
  local grant = math.min(alloc[me], budget - others)
  if fenced then grant = math.min(grant, mine) end
  if grant < 0 then grant = 0 end
  redis.call('HSET', KEYS[1], 's:' .. me .. ':' .. b, string.format('%d', math.max(grant, inUse, mine)), 'd:' .. me .. ':' .. b, string.format('%d', d))
  out[#out + 1] = string.format('%d', grant)
end
redis.call('PEXPIRE', KEYS[1], math.max(ttl * 3, 600000))
return out
`;

/**
 * The fleet watcher's lease (redis-lease.ts): one holder at a time, each
 * holding under a fencing token that grows with every acquisition.
 *
 * KEYS[1]  the lease key: `<token>:<holder id>`, with a PX expiry
 * KEYS[2]  the token counter (INCR'd at each acquisition, never expires)
 * ARGV[1]  the holder id
 * ARGV[2]  the lease length, ms
 * ARGV[3]  the token held (renew), or "" (acquire)
 *
 * Renew: PEXPIREs the lease only while it is `<ARGV[3]>:<ARGV[1]>`.
 * Acquire: when the lease is free, INCR the counter and `SET lease
 * "<token>:<id>" NX PX ms` (a lease this holder already has is renewed under
 * its token: a retry after a reply that was lost). Replies strings:
 * {"1", token} held; {"0", the lease's value or ""} not held.
 */
export const LEASE_SCRIPT = `
local cur = redis.call('GET', KEYS[1])
if ARGV[3] ~= '' then
  if cur == ARGV[3] .. ':' .. ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {'1', ARGV[3]}
  end
  return {'0', cur or ''}
end
if cur then
  local token, holder = string.match(cur, '^(%d+):(.*)$')
  if holder == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {'1', token}
  end
  return {'0', cur}
end
local token = string.format('%d', redis.call('INCR', KEYS[2]))
redis.call('SET', KEYS[1], token .. ':' .. ARGV[1], 'NX', 'PX', ARGV[2])
return {'1', token}
`;

/** Deletes the lease (KEYS[1]) only while it is `<ARGV[1]>` (`<token>:<holder id>`): a holder hands over at once on close. */
export const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`;

"""Lua scripts of the Redis cache: every session operation is one of them.

``PRELUDE`` (shared helpers) is prepended to every body in ``SCRIPTS``, which maps
the operation name to its body; :data:`READ_QA`, the hot read, runs without it.
"""

# --------------------------------------------------------------------------------------------
# Lua. Times are integer microseconds of the backend's clock, passed in as strings.
# Stamp rule (ARGV 2..4), from the TTL policy's declaration: 'T' restamp to p2 when the
# expiry is unset or < p1 (p1 = TTLPolicy.restamp_cutoff, p2 = expiry_after_write);
# 'N' never (TTL off).

PRELUDE = r"""
local GRACE_MS = 1000
local TOMBSTONE = '<memlab deleted>'
local function dead(exp, now)
  return exp and tonumber(exp) <= now
end
local function ms_left(exp, now)
  local ms = math.ceil((tonumber(exp) - now) / 1000)
  if ms < 0 then ms = 0 end
  return ms + GRACE_MS
end
-- f: the meta's {qa_epoch, qa_exp, ctx_seq, ctx_exp} as this script left them, or nil to read them
local function touch_meta(meta, now, f)
  f = f or redis.call('HMGET', meta, 'qa_epoch', 'qa_exp', 'ctx_seq', 'ctx_exp')
  if not f[1] and not f[3] then redis.call('DEL', meta) return end
  local best = nil
  for i = 1, 3, 2 do
    if f[i] then
      if not f[i + 1] then redis.call('PERSIST', meta) return end
      local left = ms_left(f[i + 1], now)
      if best == nil or left > best then best = left end
    end
  end
  redis.call('PEXPIRE', meta, string.format('%d', best))
end
-- f (optional): the meta's four fields as touch_meta takes them, `field`'s own slot updated here
local function slide(meta, field, cur, data, now, rule, p1, p2, f)
  if rule == 'T' and ((not cur) or tonumber(cur) < tonumber(p1)) then
    redis.call('HSET', meta, field, p2)
    cur = p2
  end
  if cur then
    local ms = string.format('%d', ms_left(cur, now))
    for _, key in ipairs(data) do redis.call('PEXPIRE', key, ms) end
  end
  if f then f[field == 'qa_exp' and 2 or 4] = cur end
  touch_meta(meta, now, f)
end
local now, rule, p1, p2 = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
"""

# KEYS meta qa qa_index | ARGV now rule p1 p2 qa_id payload new_epoch
_APPEND_QA = r"""
local meta, list, idx = KEYS[1], KEYS[2], KEYS[3]
local st = redis.call('HMGET', meta, 'qa_epoch', 'qa_exp', 'ctx_seq', 'ctx_exp')
local exp = st[2]
if (not st[1]) or dead(exp, now) then
  redis.call('DEL', list, idx)
  redis.call('HDEL', meta, 'qa_exp')
  redis.call('HSET', meta, 'qa_epoch', ARGV[7])
  st[1], exp = ARGV[7], false
elseif redis.call('HEXISTS', idx, ARGV[5]) == 1 then
  return 'dup'
end
local n = redis.call('RPUSH', list, ARGV[6])
redis.call('HSET', idx, ARGV[5], n - 1)
slide(meta, 'qa_exp', exp, {list, idx}, now, rule, p1, p2, st)
return 'ok'
"""

# KEYS meta qa | ARGV now start  -> the payloads from list index `start` on ({} when dead or missing).
# No prelude: the read defines nothing it does not use.
READ_QA = r"""
local st = redis.call('HMGET', KEYS[1], 'qa_epoch', 'qa_exp')
if (not st[1]) or (st[2] and tonumber(st[2]) <= tonumber(ARGV[1])) then return {} end
return redis.call('LRANGE', KEYS[2], tonumber(ARGV[2]), -1)
"""

# KEYS meta qa | ARGV now cursor_epoch cursor_len  -> false (dead) | {epoch, len, reset, payloads}
_READ_QA_LOG = r"""
local st = redis.call('HMGET', KEYS[1], 'qa_epoch', 'qa_exp')
if (not st[1]) or dead(st[2], tonumber(ARGV[1])) then return false end
local n = redis.call('LLEN', KEYS[2])
local start, reset = 0, 1
if ARGV[2] == st[1] and tonumber(ARGV[3]) <= n then
  start, reset = tonumber(ARGV[3]), 0
end
return {st[1], n, reset, redis.call('LRANGE', KEYS[2], start, -1)}
"""

# KEYS meta qa qa_index | ARGV now qa_id  -> false | payload
_GET_QA = r"""
local st = redis.call('HMGET', KEYS[1], 'qa_epoch', 'qa_exp')
if (not st[1]) or dead(st[2], tonumber(ARGV[1])) then return false end
local pos = redis.call('HGET', KEYS[3], ARGV[2])
if not pos then return false end
return redis.call('LINDEX', KEYS[2], pos)
"""

# KEYS meta qa qa_index | ARGV now rule p1 p2 qa_id old new has_new new_epoch
_SET_QA = r"""
local meta, list, idx = KEYS[1], KEYS[2], KEYS[3]
local st = redis.call('HMGET', meta, 'qa_epoch', 'qa_exp')
if (not st[1]) or dead(st[2], now) then return 'gone' end
local pos = redis.call('HGET', idx, ARGV[5])
if not pos then return 'gone' end
if redis.call('LINDEX', list, pos) ~= ARGV[6] then return 'retry' end
if ARGV[8] == '1' then
  redis.call('LSET', list, pos, ARGV[7])
  redis.call('HSET', meta, 'qa_epoch', ARGV[9])
end
slide(meta, 'qa_exp', st[2], {list, idx}, now, rule, p1, p2)
return 'ok'
"""

# KEYS meta qa qa_index | ARGV now rule p1 p2 qa_id new_epoch  -> 1 deleted, 0 absent
_DELETE_QA = r"""
local meta, list, idx = KEYS[1], KEYS[2], KEYS[3]
local st = redis.call('HMGET', meta, 'qa_epoch', 'qa_exp')
if (not st[1]) or dead(st[2], now) then return 0 end
local pos = redis.call('HGET', idx, ARGV[5])
if not pos then return 0 end
pos = tonumber(pos)
local n = redis.call('LLEN', list)
redis.call('HDEL', idx, ARGV[5])
if pos == n - 1 then
  redis.call('RPOP', list)
else
  redis.call('LSET', list, pos, TOMBSTONE)
  if pos < n / 2 then redis.call('LREM', list, 1, TOMBSTONE) else redis.call('LREM', list, -1, TOMBSTONE) end
  local all = redis.call('HGETALL', idx)
  local batch = {}
  for i = 1, #all, 2 do
    local p = tonumber(all[i + 1])
    if p > pos then
      batch[#batch + 1] = all[i]
      batch[#batch + 1] = p - 1
      if #batch >= 1000 then
        redis.call('HSET', idx, unpack(batch))
        batch = {}
      end
    end
  end
  if #batch > 0 then redis.call('HSET', idx, unpack(batch)) end
end
redis.call('HSET', meta, 'qa_epoch', ARGV[6])
slide(meta, 'qa_exp', st[2], {list, idx}, now, rule, p1, p2)
return 1
"""

# KEYS meta ctx ctx_order | ARGV now rule p1 p2 entry_id payload
_UPSERT_CTX = r"""
local meta, hash, order = KEYS[1], KEYS[2], KEYS[3]
local st = redis.call('HMGET', meta, 'ctx_seq', 'ctx_exp')
local exp = st[2]
if (not st[1]) or dead(exp, now) then
  redis.call('DEL', hash, order)
  redis.call('HDEL', meta, 'ctx_exp')
  redis.call('HSET', meta, 'ctx_seq', 0)
  exp = false
end
if redis.call('HSET', hash, ARGV[5], ARGV[6]) == 1 then
  redis.call('ZADD', order, 'NX', redis.call('HINCRBY', meta, 'ctx_seq', 1), ARGV[5])
end
slide(meta, 'ctx_exp', exp, {hash, order}, now, rule, p1, p2)
return 'ok'
"""

# KEYS meta ctx ctx_order | ARGV now
_READ_CTX = r"""
local st = redis.call('HMGET', KEYS[1], 'ctx_seq', 'ctx_exp')
if (not st[1]) or dead(st[2], tonumber(ARGV[1])) then return {} end
local ids = redis.call('ZRANGE', KEYS[3], 0, -1)
local out = {}
local i = 1
while i <= #ids do
  local j = math.min(i + 499, #ids)
  local values = redis.call('HMGET', KEYS[2], unpack(ids, i, j))
  for k = 1, j - i + 1 do
    if values[k] then out[#out + 1] = values[k] end
  end
  i = j + 1
end
return out
"""

# KEYS meta ctx | ARGV now entry_id  -> false | payload
_GET_CTX = r"""
local st = redis.call('HMGET', KEYS[1], 'ctx_seq', 'ctx_exp')
if (not st[1]) or dead(st[2], tonumber(ARGV[1])) then return false end
return redis.call('HGET', KEYS[2], ARGV[2])
"""

# KEYS meta ctx ctx_order | ARGV now rule p1 p2 entry_id old new has_new
_SET_CTX = r"""
local meta, hash, order = KEYS[1], KEYS[2], KEYS[3]
local st = redis.call('HMGET', meta, 'ctx_seq', 'ctx_exp')
if (not st[1]) or dead(st[2], now) then return 'gone' end
local current = redis.call('HGET', hash, ARGV[5])
if not current then return 'gone' end
if current ~= ARGV[6] then return 'retry' end
if ARGV[8] == '1' then redis.call('HSET', hash, ARGV[5], ARGV[7]) end
slide(meta, 'ctx_exp', st[2], {hash, order}, now, rule, p1, p2)
return 'ok'
"""

# KEYS meta ctx ctx_order | ARGV now entry_id
_DELETE_CTX = r"""
local st = redis.call('HMGET', KEYS[1], 'ctx_seq', 'ctx_exp')
if (not st[1]) or dead(st[2], tonumber(ARGV[1])) then return 0 end
if redis.call('HDEL', KEYS[2], ARGV[2]) == 1 then
  redis.call('ZREM', KEYS[3], ARGV[2])
  return 1
end
return 0
"""

# KEYS meta qa qa_index ctx ctx_order | ARGV now
_DELETE_SESSION = r"""
local st = redis.call('HMGET', KEYS[1], 'qa_epoch', 'qa_exp', 'ctx_seq', 'ctx_exp')
local existed = 0
if st[1] and not dead(st[2], now) and redis.call('LLEN', KEYS[2]) > 0 then existed = 1 end
if st[3] and not dead(st[4], now) and redis.call('HLEN', KEYS[4]) > 0 then existed = 1 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return existed
"""

# KEYS meta qa qa_index ctx ctx_order | ARGV now  -> rows removed
_SWEEP_ONE = r"""
local st = redis.call('HMGET', KEYS[1], 'qa_epoch', 'qa_exp', 'ctx_seq', 'ctx_exp')
local removed = 0
if st[1] and dead(st[2], now) then
  removed = removed + redis.call('LLEN', KEYS[2])
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('HDEL', KEYS[1], 'qa_epoch', 'qa_exp')
end
if st[3] and dead(st[4], now) then
  removed = removed + redis.call('HLEN', KEYS[4])
  redis.call('DEL', KEYS[4], KEYS[5])
  redis.call('HDEL', KEYS[1], 'ctx_seq', 'ctx_exp')
end
return removed
"""

SCRIPTS = {
    "append_qa": _APPEND_QA,
    "read_qa_log": _READ_QA_LOG,
    "get_qa": _GET_QA,
    "set_qa": _SET_QA,
    "delete_qa": _DELETE_QA,
    "upsert_ctx": _UPSERT_CTX,
    "read_ctx": _READ_CTX,
    "get_ctx": _GET_CTX,
    "set_ctx": _SET_CTX,
    "delete_ctx": _DELETE_CTX,
    "delete_session": _DELETE_SESSION,
    "sweep_one": _SWEEP_ONE,
}

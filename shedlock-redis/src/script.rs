//! The Lua scripts: one per operation, each on one key (Redis Cluster routes it by that key),
//! each reading the server's `TIME` in the same atomic step that decides.
//!
//! A lock is one hash: `name` (the lock name, so a key reached through another provider's
//! overlapping prefix is recognised, never shared), `lock_until`, `locked_at`, `token` and
//! `last_fire` (integers, µs since the Unix epoch by the server's clock, written as decimal
//! text) and `locked_by`. The key has no TTL: expiry is `lock_until` against `TIME`, so a late
//! release or extend still finds the record and acts as the contract says, and `last_fire`
//! outlives every lock. A script that decides not to act writes nothing.
//!
//! Lua numbers are doubles: every value here (µs since 1970, well below 2^53 until the year
//! 2255) is exact. Values are written with `%.0f`, never with Lua's default number format,
//! which would switch to exponent notation.

use std::sync::LazyLock;

use redis::Script;

/// Helpers every script starts with. `fields(...)` reads the record's `name` and the fields
/// asked for, and returns an error reply beside them for a key that holds another lock's record
/// (overlapping prefixes) or a hash that is not a lock record; each script returns it at once.
macro_rules! prelude {
    () => {
        r"
local key, name = KEYS[1], ARGV[1]
local function int(v)
  if not v then return nil end
  local n = tonumber(v)
  if not n then
    error({err = 'SHEDLOCKBAD the lock record has a field that is not a number: ' .. tostring(v)})
  end
  return n
end
local function str(n) return string.format('%.0f', n) end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fields(...)
  local v = redis.call('HMGET', key, 'name', ...)
  if v[1] then
    if v[1] ~= name then
      return v, redis.error_reply('SHEDLOCKFOREIGN the key holds the record of another lock name')
    end
  elseif redis.call('EXISTS', key) == 1 then
    return v, redis.error_reply('SHEDLOCKNOTLOCK the key holds a hash that is not a lock record')
  end
  return v, nil
end
"
    };
}

/// `ARGV = name, at_most µs, owner` → nil (held) or `{now, lock_until, token}`.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'token')
if refused then return refused end
local now = now_us()
local held_until = int(v[2])
if held_until and held_until > now then return false end
local token = math.max((int(v[3]) or 0) + 1, now)
local lock_until = now + tonumber(ARGV[2])
redis.call('HSET', key, 'name', name, 'lock_until', str(lock_until), 'locked_at', str(now),
  'locked_by', ARGV[3], 'token', str(token))
return {now, lock_until, token}
"
    ))
});

/// `ARGV = name, owner, token, at_most µs` → nil (not this acquisition's, or expired) or the
/// new `lock_until`.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'locked_by', 'token')
if refused then return refused end
local now = now_us()
local held_until = int(v[2])
if not held_until or v[3] ~= ARGV[2] or int(v[4]) ~= tonumber(ARGV[3]) or held_until <= now then
  return false
end
local lock_until = now + tonumber(ARGV[4])
redis.call('HSET', key, 'lock_until', str(lock_until))
return lock_until
"
    ))
});

/// `ARGV = name, owner, token, at_least µs` → 1 (released) or 0 (not this acquisition's).
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'locked_at', 'locked_by', 'token')
if refused then return refused end
if not v[2] or v[4] ~= ARGV[2] or int(v[5]) ~= tonumber(ARGV[3]) then return 0 end
local now = now_us()
redis.call('HSET', key, 'lock_until', str(math.max(now, int(v[3]) + tonumber(ARGV[4]))))
return 1
"
    ))
});

/// `ARGV = name` → `{now}` (no record) or `{now, lock_until, locked_at, locked_by, token,
/// last_fire or nil}`. Read-only.
pub(crate) static READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'locked_at', 'locked_by', 'token', 'last_fire')
if refused then return refused end
local now = now_us()
if not v[2] then return {now} end
return {now, int(v[2]), int(v[3]), v[4], int(v[5]), int(v[6]) or false}
"
    ))
});

/// `ARGV = name, F µs, next µs, at_most µs, owner` → `{case, now, …}`: `{0, now, lock_until,
/// token}` claimed, `{1, now}` too early, `{2, now}` window passed, `{3, now, lock_until,
/// locked_at, locked_by, token, recorded}` claimed elsewhere, `{4, now, lock_until, locked_at,
/// locked_by, token}` held: the record as the script read it (a missing field is `false`, a nil
/// reply). Checked in `FireClaim`'s documented order; only a claim writes.
pub(crate) static CLAIM_FIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'token', 'last_fire', 'locked_at', 'locked_by')
if refused then return refused end
local now = now_us()
local fire, next_fire = tonumber(ARGV[2]), tonumber(ARGV[3])
if now < fire then return {1, now} end
if now >= next_fire then return {2, now} end
local function holder(case, ...)
  return {case, now, int(v[2]) or false, int(v[5]) or false, v[6] or false, int(v[3]) or false, ...}
end
local recorded = int(v[4])
if recorded and recorded >= fire then return holder(3, recorded) end
local held_until = int(v[2])
if held_until and held_until > now then return holder(4) end
local token = math.max((int(v[3]) or 0) + 1, now)
local lock_until = now + tonumber(ARGV[4])
redis.call('HSET', key, 'name', name, 'lock_until', str(lock_until), 'locked_at', str(now),
  'locked_by', ARGV[5], 'token', str(token), 'last_fire', str(fire))
return {0, now, lock_until, token}
"
    ))
});

/// `ARGV = name, owner, locked_at µs, token` → 1 (freed) or 0 (not exactly that acquisition,
/// or not held).
pub(crate) static UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'locked_at', 'locked_by', 'token')
if refused then return refused end
local now = now_us()
local held_until = int(v[2])
if not held_until or held_until <= now or v[4] ~= ARGV[2] or int(v[3]) ~= tonumber(ARGV[3])
    or int(v[5]) ~= tonumber(ARGV[4]) then
  return 0
end
redis.call('HSET', key, 'lock_until', str(now))
return 1
"
    ))
});

/// `ARGV = name` → nil (no record, or not held) or the record it freed, as [`READ`] returns it.
pub(crate) static FORCE_UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'locked_at', 'locked_by', 'token', 'last_fire')
if refused then return refused end
local now = now_us()
local held_until = int(v[2])
if not held_until or held_until <= now then return false end
redis.call('HSET', key, 'lock_until', str(now))
return {now, held_until, int(v[3]), v[4], int(v[5]), int(v[6]) or false}
"
    ))
});

/// For listing: `KEYS[1]` only, no name check → `{now}` or `{now, name, lock_until, locked_at,
/// locked_by, token, last_fire or nil}` (`name` nil when the hash has none). Read-only.
pub(crate) const LIST_READ: &str = r"
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HMGET', key, 'name', 'lock_until', 'locked_at', 'locked_by', 'token', 'last_fire')
if not v[2] or not tonumber(v[2]) or not tonumber(v[3]) or not tonumber(v[5]) then return {now} end
return {now, v[1], tonumber(v[2]), tonumber(v[3]), v[4], tonumber(v[5]), tonumber(v[6]) or false}
";

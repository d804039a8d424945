//! The Lua scripts, one per operation.
//!
//! Each script works on one key, by which Redis Cluster routes it. [`RELEASE_RUN`] with history
//! also writes the lock's history list, in the same hash slot. Each script reads the server's
//! `TIME` in the same atomic step that decides, and one that decides not to act writes nothing.
//!
//! A lock is one hash with the fields `name`, so a key reached through another provider's
//! overlapping prefix is recognised, never shared, `locked_by`, and `lock_until`, `locked_at`,
//! `token` and `last_fire` as integers in µs since the Unix epoch by the server's clock, written as
//! decimal text. The key has no TTL: expiry is `lock_until` against `TIME`. So a late release or
//! extend still finds the record and acts as the contract says, and `last_fire` outlives every
//! lock.
//!
//! [`RELEASE_RUN`] keeps the job state in the same hash: `last_run_fire`, `last_run_started`,
//! `last_run_ended` and `last_success` in µs, `last_run_runner`, `last_run_outcome`,
//! `last_run_error`, empty after outcomes other than a failure, `consecutive_failures`, and
//! `last_run_token`, the token of the acquisition whose run was recorded, so a release sent again
//! records nothing twice.
//!
//! [`PAUSE`] and [`RESUME`] keep an operator's pause in the same hash (see the crate README,
//! "Pauses"): `paused_at` and `paused_until` in µs, `paused_until` absent for a pause until
//! resumed, `paused_by`, and `paused_reason`, absent without a reason. [`CLAIM_FIRE`] reads them in
//! its one step and answers "paused" while the pause holds. [`PAUSE`], [`RESUME`], [`UNLOCK`] and
//! [`FORCE_UNLOCK`] record the operator's last action in `last_action` (`paused`, `resumed` or
//! `unlocked`, and `triggered` by [`TRIGGER`]), `last_action_by` and `last_action_at` in µs, in the step that acts.
//!
//! [`TRIGGER`] and [`CLAIM_TRIGGER`] keep an operator's trigger ("run now") in the same hash (see
//! the crate README, "Run now"): `trigger_id` (decimal text, compared as text), `trigger_at` and
//! `trigger_expires` in µs, `trigger_by`, and, once a replica took it, `trigger_taken_by` and
//! `trigger_taken_at`. The triggers index, a sorted set beside the locks, is written by
//! [`INDEX_TRIGGER`], read by [`PENDING_TRIGGERS`] and cleaned by [`UNINDEX_TRIGGER`]: a hint of
//! where to look, never what decides.
//!
//! Lua numbers are doubles. Every value here is µs since 1970, exact below 2^53 until the year
//! 2255. Values are written with `%.0f`, as Lua's default number format would switch to exponent
//! notation.

use std::sync::LazyLock;

use redis::Script;

/// Helpers every script starts with. `fields(...)` reads the record's `name` and the fields asked
/// for, and beside them an error reply, which each script returns at once, for a hash that is not
/// a lock record or holds another lock's record, as with overlapping prefixes.
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

/// `ARGV = name, owner, token, at_most µs` → the new `lock_until`, or nil. Nil means the lock is
/// not this acquisition's, or has expired.
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

/// `ARGV = name, owner, token, at_least µs` → 1 when released. 0 when the lock is not this
/// acquisition's.
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

/// `STATE` and `state_at`. `STATE` is the job state fields of a lock's hash, read by the same
/// `HMGET` as the lock's fields. `state_at(v, i)` is those values of `v` from index `i` on, which
/// the readers return after `last_fire` in `STATE`'s order. Each is `false`, a nil reply, when
/// missing or not a number where one is expected.
macro_rules! state {
    () => {
        r"
local STATE = {'last_run_fire', 'last_run_runner', 'last_run_started', 'last_run_ended',
  'last_run_outcome', 'last_run_error', 'last_success', 'consecutive_failures'}
local function state_at(s, i)
  return tonumber(s[i]) or false, s[i + 1] or false, tonumber(s[i + 2]) or false,
    tonumber(s[i + 3]) or false, s[i + 4] or false, s[i + 5] or false,
    tonumber(s[i + 6]) or false, tonumber(s[i + 7]) or false
end
"
    };
}

/// `READ_FIELDS` and `tail_at`, after [`state!`]. `READ_FIELDS` is `STATE` followed by the pause,
/// last action and trigger fields, `STEER`, which the readers return after the job state:
/// `paused_at`, `paused_until`, `paused_by`, `paused_reason`, `last_action`, `last_action_by`,
/// `last_action_at`, `trigger_id` (text: an id above 2^53 is not exact as a Lua number),
/// `trigger_at`, `trigger_expires`, `trigger_by`, `trigger_taken_by`, `trigger_taken_at`. `tail_at(v, i)` is the values of both from index `i` on, as `state_at` gives
/// them, then those of `STEER`, each `false` when missing or not a number where one is expected.
/// (Lua expands only the last call in a table constructor, so the readers call one function.)
macro_rules! steer {
    () => {
        r"
local STEER = {'paused_at', 'paused_until', 'paused_by', 'paused_reason', 'last_action',
  'last_action_by', 'last_action_at', 'trigger_id', 'trigger_at', 'trigger_expires', 'trigger_by',
  'trigger_taken_by', 'trigger_taken_at'}
local READ_FIELDS = {unpack(STATE)}
for _, field in ipairs(STEER) do table.insert(READ_FIELDS, field) end
local function tail_at(s, i)
  local out = {state_at(s, i)}
  local p = i + #STATE
  for _, x in ipairs({tonumber(s[p]) or false, tonumber(s[p + 1]) or false, s[p + 2] or false,
      s[p + 3] or false, s[p + 4] or false, s[p + 5] or false, tonumber(s[p + 6]) or false,
      s[p + 7] or false, tonumber(s[p + 8]) or false, tonumber(s[p + 9]) or false,
      s[p + 10] or false, s[p + 11] or false, tonumber(s[p + 12]) or false}) do
    table.insert(out, x)
  end
  return unpack(out)
end
"
    };
}

/// `ARGV = name` → `{now}` (no record) or `{now, lock_until, locked_at, locked_by, token, last_fire
/// or nil, <the job state: see state!>, <the pause, last action and trigger: see steer!>}`.
/// Read-only.
pub(crate) static READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        state!(),
        steer!(),
        r"
local v, refused = fields('lock_until', 'locked_at', 'locked_by', 'token', 'last_fire',
  unpack(READ_FIELDS))
if refused then return refused end
local now = now_us()
if not v[2] then return {now} end
return {now, int(v[2]), int(v[3]), v[4], int(v[5]), int(v[6]) or false, tail_at(v, 7)}
"
    ))
});

/// `KEYS = lock key [, history key]`, `ARGV = name, owner, token, at_least µs, fire µs, outcome
/// kind, error text, keep, max_age µs or -1` → `{0}`, writing nothing, when the lock is not this
/// acquisition's, or `{1, history}` after releasing it as [`RELEASE`] does and recording the run in
/// the same step. The job state fields are set per `JobState::after`. A run already recorded for
/// this token, the same release sent again after a lost reply, is not recorded twice.
///
/// With a history key, the run is also pushed as JSON at the head of that list: `fire`, `runner`,
/// `started`, `ended` in µs, `outcome`, and `error` for a failed run. The list is trimmed to `keep`
/// entries, and entries that ended before `now - max_age`, or are not such JSON, are popped from
/// its tail. All of that runs under `pcall`, so a history that cannot be written never fails the
/// release. `history` is then the error's text, and `false` otherwise.
pub(crate) static RELEASE_RUN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r#"
local v, refused = fields('lock_until', 'locked_at', 'locked_by', 'token', 'consecutive_failures',
  'last_run_token')
if refused then return refused end
if not v[2] or v[4] ~= ARGV[2] or int(v[5]) ~= tonumber(ARGV[3]) then return {0} end
local now = now_us()
local started = int(v[3])
local lock_until = str(math.max(now, started + tonumber(ARGV[4])))
if v[7] == ARGV[3] then
  redis.call('HSET', key, 'lock_until', lock_until)
  return {1, false}
end
local kind, failures = ARGV[6], int(v[6]) or 0
local set = {'lock_until', lock_until, 'last_run_fire', ARGV[5], 'last_run_runner', ARGV[2],
  'last_run_started', str(started), 'last_run_ended', str(now), 'last_run_outcome', kind,
  'last_run_token', ARGV[3]}
if kind == 'succeeded' then
  failures = 0
  table.insert(set, 'last_success')
  table.insert(set, str(now))
elseif kind == 'failed' or kind == 'panicked' then
  failures = math.min(failures + 1, 4294967295)
end
table.insert(set, 'consecutive_failures')
table.insert(set, str(failures))
table.insert(set, 'last_run_error')
table.insert(set, ARGV[7])
redis.call('HSET', key, unpack(set))
if not KEYS[2] then return {1, false} end
local ok, err = pcall(function()
  local history = KEYS[2]
  local entry = '{"fire":' .. ARGV[5] .. ',"runner":' .. cjson.encode(ARGV[2]) ..
    ',"started":' .. str(started) .. ',"ended":' .. str(now) .. ',"outcome":' ..
    cjson.encode(kind)
  if kind == 'failed' then entry = entry .. ',"error":' .. cjson.encode(ARGV[7]) end
  redis.call('LPUSH', history, entry .. '}')
  redis.call('LTRIM', history, 0, tonumber(ARGV[8]) - 1)
  local max_age = tonumber(ARGV[9])
  if max_age >= 0 then
    local cutoff = now - max_age
    while true do
      local oldest = redis.call('LINDEX', history, -1)
      if not oldest then break end
      local decoded, run = pcall(cjson.decode, oldest)
      local ended = decoded and type(run) == 'table' and tonumber(run.ended)
      if ended and ended >= cutoff then break end
      redis.call('RPOP', history)
    end
  end
end)
if ok then return {1, false} end
if type(err) == 'table' then err = err.err or err.message end
return {1, tostring(err)}
"#
    ))
});

/// `ARGV = name, F µs, next µs, at_most µs, owner` → `{case, now, …}`.
///
/// - `{0, now, lock_until, token}`: claimed.
/// - `{1, now}`: too early.
/// - `{2, now}`: window passed.
/// - `{5, now, paused_until}`: paused, by a pause that holds at `now`: one without an end
///   (`paused_until` nil), or whose end is after `now`.
/// - `{3, now, lock_until, locked_at, locked_by, token, recorded}`: claimed elsewhere.
/// - `{4, now, lock_until, locked_at, locked_by, token}`: held.
///
/// The fields are the record as the script read it, a missing one `false`, a nil reply. The cases
/// are checked in `FireClaim`'s documented order, the pause after the window and before the
/// recorded fire. Only a claim writes.
pub(crate) static CLAIM_FIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'token', 'last_fire', 'locked_at', 'locked_by',
  'paused_at', 'paused_until')
if refused then return refused end
local now = now_us()
local fire, next_fire = tonumber(ARGV[2]), tonumber(ARGV[3])
if now < fire then return {1, now} end
if now >= next_fire then return {2, now} end
if int(v[7]) then
  local paused_until = int(v[8])
  if not paused_until or now < paused_until then return {5, now, paused_until or false} end
end
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

/// `ARGV = name, owner, locked_at µs, token, actor` → 1 when freed, recording `actor` as the last
/// action (`unlocked`). 0, writing nothing, when the lock is not exactly that acquisition, or not
/// held.
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
redis.call('HSET', key, 'lock_until', str(now), 'last_action', 'unlocked', 'last_action_by',
  ARGV[5], 'last_action_at', str(now))
return 1
"
    ))
});

/// `ARGV = name, actor` → the record it freed, as [`READ`] returns it, recording `actor` as the
/// last action (`unlocked`). Nil, writing nothing, when there is no record, or the lock is not
/// held.
pub(crate) static FORCE_UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        state!(),
        steer!(),
        r"
local v, refused = fields('lock_until', 'locked_at', 'locked_by', 'token', 'last_fire',
  unpack(READ_FIELDS))
if refused then return refused end
local now = now_us()
local held_until = int(v[2])
if not held_until or held_until <= now then return false end
redis.call('HSET', key, 'lock_until', str(now), 'last_action', 'unlocked', 'last_action_by',
  ARGV[2], 'last_action_at', str(now))
return {now, held_until, int(v[3]), v[4], int(v[5]), int(v[6]) or false, tail_at(v, 7)}
"
    ))
});

/// `ARGV = name, actor, end kind, end µs, reason` → `{0, now}`, writing nothing, when the end is
/// not after the server's now, or `{1, now, paused_until}` after pausing.
///
/// The end kind is `none` (until resumed: `paused_until` nil), `for` (the end is now + the µs
/// given) or `until` (the end is the µs given). `reason` is absent for a pause without one. A
/// pause already there is replaced. A missing record is created as a free lock: `lock_until` and
/// `locked_at` now, `locked_by` empty and `token` 0, so the first acquisition's token follows the
/// rule of [`ACQUIRE`].
pub(crate) static PAUSE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until')
if refused then return refused end
local now = now_us()
local kind, amount = ARGV[3], tonumber(ARGV[4])
local paused_until = false
if kind == 'for' then
  paused_until = now + amount
elseif kind == 'until' then
  if amount <= now then return {0, now} end
  paused_until = amount
end
if not v[2] then
  redis.call('HSET', key, 'name', name, 'lock_until', str(now), 'locked_at', str(now),
    'locked_by', '', 'token', '0')
end
local set = {'paused_at', str(now), 'paused_by', ARGV[2], 'last_action', 'paused',
  'last_action_by', ARGV[2], 'last_action_at', str(now)}
local clear = {}
if paused_until then
  table.insert(set, 'paused_until')
  table.insert(set, str(paused_until))
else
  table.insert(clear, 'paused_until')
end
if ARGV[5] then
  table.insert(set, 'paused_reason')
  table.insert(set, ARGV[5])
else
  table.insert(clear, 'paused_reason')
end
redis.call('HSET', key, unpack(set))
if #clear > 0 then redis.call('HDEL', key, unpack(clear)) end
return {1, now, paused_until}
"
    ))
});

/// `ARGV = name, actor` → `{now}`, writing nothing, when the record keeps no pause, or `{now,
/// paused_at, paused_until, paused_by, paused_reason}`, the pause it removed, also one whose end
/// has passed, after recording `actor` as the last action (`resumed`).
pub(crate) static RESUME: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('paused_at', 'paused_until', 'paused_by', 'paused_reason')
if refused then return refused end
local now = now_us()
if not v[2] then return {now} end
redis.call('HDEL', key, 'paused_at', 'paused_until', 'paused_by', 'paused_reason')
redis.call('HSET', key, 'last_action', 'resumed', 'last_action_by', ARGV[2], 'last_action_at',
  str(now))
return {now, int(v[2]), int(v[3]) or false, v[4] or false, v[5] or false}
"
    ))
});

/// For listing: `KEYS[1]` only, with no name check → `{now}` or `{now, name, lock_until, locked_at,
/// locked_by, token, last_fire or nil, <the job state: see state!>, <the pause, last action and
/// trigger: see steer!>}`, `name` nil when the hash has none. Read-only.
pub(crate) const LIST_READ: &str = concat!(
    state!(),
    steer!(),
    r"
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HMGET', key, 'name', 'lock_until', 'locked_at', 'locked_by', 'token',
  'last_fire', unpack(READ_FIELDS))
if not v[2] or not tonumber(v[2]) or not tonumber(v[3]) or not tonumber(v[5]) then return {now} end
return {now, v[1], tonumber(v[2]), tonumber(v[3]), v[4], tonumber(v[5]), tonumber(v[6]) or false,
  tail_at(v, 7)}
"
);

/// `KEYS[1]` = the definitions hash, `ARGV = ttl µs, replica, version, then per definition: field,
/// job, lock_name, spec` → the number of expired entries removed, as
/// [`RedisLockProvider`](crate::RedisLockProvider)'s `publish_definitions` says. A value that is
/// not such JSON goes too. The JSON has `job`, `lock_name`, `spec`, `replica`, `version`,
/// `published` and `expires`.
pub(crate) static PUBLISH_DEFINITIONS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function str(n) return string.format('%.0f', n) end
local all = redis.call('HGETALL', key)
local removed = 0
for i = 1, #all, 2 do
  local decoded, entry = pcall(cjson.decode, all[i + 1])
  local expires = decoded and type(entry) == 'table' and tonumber(entry.expires)
  if not expires or expires <= now then
    redis.call('HDEL', key, all[i])
    removed = removed + 1
  end
end
local tail = ',"replica":' .. cjson.encode(ARGV[2]) .. ',"version":' .. cjson.encode(ARGV[3]) ..
  ',"published":' .. str(now) .. ',"expires":' .. str(now + tonumber(ARGV[1])) .. '}'
for i = 4, #ARGV, 4 do
  redis.call('HSET', key, ARGV[i], '{"job":' .. cjson.encode(ARGV[i + 1]) .. ',"lock_name":' ..
    cjson.encode(ARGV[i + 2]) .. ',"spec":' .. cjson.encode(ARGV[i + 3]) .. tail)
end
return removed
"#,
    )
});

/// `KEYS[1]` = the definitions hash → `{now, value…}`: the values whose `expires` is after now.
/// Read-only.
pub(crate) static READ_DEFINITIONS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {now}
for _, value in ipairs(redis.call('HVALS', KEYS[1])) do
  local decoded, entry = pcall(cjson.decode, value)
  local expires = decoded and type(entry) == 'table' and tonumber(entry.expires)
  if expires and expires > now then table.insert(out, value) end
end
return out
",
    )
});

/// `KEYS[1]` = the definitions hash, `ARGV[1]` = the field prefix of a job → how many entries whose
/// fields start with it it removed.
pub(crate) static FORGET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local key, prefix = KEYS[1], ARGV[1]
local removed = 0
for _, field in ipairs(redis.call('HKEYS', key)) do
  if string.sub(field, 1, #prefix) == prefix then
    redis.call('HDEL', key, field)
    removed = removed + 1
  end
end
return removed
",
    )
});

/// `ARGV = name, actor, id, expires_in µs` → `{case, now, …}`, in `TriggerAnswer`'s terms:
///
/// - `{1, now, requested_at, expires, taken_by, taken_at}`: requested. The trigger `id` is written,
///   or was already: the same call sent again after a lost reply answers its own trigger, in
///   whatever state it is now, and writes nothing.
/// - `{3, now, paused_at, paused_until, paused_by, paused_reason}`: paused, by a pause that holds.
/// - `{2, now, lock_until, locked_at, locked_by, token}`: held.
/// - `{4, now, id, requested_at, expires, by}`: another trigger is pending (not taken, not
///   expired).
///
/// Checked in that order, as the in-memory store does. Only a request writes: the trigger fields,
/// with `trigger_taken_*` removed, and `triggered` as the last action. A missing record is created
/// as a free lock, as [`PAUSE`] does.
pub(crate) static TRIGGER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'locked_at', 'locked_by', 'token', 'paused_at',
  'paused_until', 'paused_by', 'paused_reason', 'trigger_id', 'trigger_at', 'trigger_expires',
  'trigger_by', 'trigger_taken_by', 'trigger_taken_at')
if refused then return refused end
local now = now_us()
if v[10] and v[10] == ARGV[3] then
  return {1, now, int(v[11]) or false, int(v[12]) or false, v[14] or false, int(v[15]) or false}
end
local paused_at = int(v[6])
if paused_at then
  local paused_until = int(v[7])
  if not paused_until or now < paused_until then
    return {3, now, paused_at, paused_until or false, v[8] or false, v[9] or false}
  end
end
local held_until = int(v[2])
if held_until and held_until > now then
  return {2, now, held_until, int(v[3]) or false, v[4] or false, int(v[5]) or false}
end
local expires = int(v[12])
if v[10] and not v[14] and expires and now < expires then
  return {4, now, v[10], int(v[11]) or false, expires, v[13] or false}
end
if not v[2] then
  redis.call('HSET', key, 'name', name, 'lock_until', str(now), 'locked_at', str(now),
    'locked_by', '', 'token', '0')
end
local ends = now + tonumber(ARGV[4])
redis.call('HSET', key, 'trigger_id', ARGV[3], 'trigger_at', str(now), 'trigger_expires',
  str(ends), 'trigger_by', ARGV[2], 'last_action', 'triggered', 'last_action_by', ARGV[2],
  'last_action_at', str(now))
redis.call('HDEL', key, 'trigger_taken_by', 'trigger_taken_at')
return {1, now, now, ends, false, false}
"
    ))
});

/// `ARGV = name, id, at_most µs, owner` → `{case, now, …}`, in `TriggerClaim`'s terms:
///
/// - `{1, now}`: gone. The record's trigger is not `id`, or is taken, or expired.
/// - `{2, now}`: paused, by a pause that holds.
/// - `{3, now, lock_until, locked_at, locked_by, token}`: held.
/// - `{0, now, lock_until, token}`: claimed. The lock is taken as [`ACQUIRE`] takes it, with its
///   token rule, and the trigger marked taken by `owner` at now. `last_fire` is never written.
pub(crate) static CLAIM_TRIGGER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        prelude!(),
        r"
local v, refused = fields('lock_until', 'locked_at', 'locked_by', 'token', 'paused_at',
  'paused_until', 'trigger_id', 'trigger_expires', 'trigger_taken_by')
if refused then return refused end
local now = now_us()
local expires = int(v[9])
if v[8] ~= ARGV[2] or v[10] or not expires or now >= expires then return {1, now} end
if int(v[6]) then
  local paused_until = int(v[7])
  if not paused_until or now < paused_until then return {2, now} end
end
local held_until = int(v[2])
if held_until and held_until > now then
  return {3, now, held_until, int(v[3]) or false, v[4] or false, int(v[5]) or false}
end
local token = math.max((int(v[5]) or 0) + 1, now)
local lock_until = now + tonumber(ARGV[3])
redis.call('HSET', key, 'lock_until', str(lock_until), 'locked_at', str(now), 'locked_by',
  ARGV[4], 'token', str(token), 'trigger_taken_by', ARGV[4], 'trigger_taken_at', str(now))
return {0, now, lock_until, token}
"
    ))
});

/// `KEYS[1]` = the triggers index, `ARGV = member, expires µs, channel, message` → 1. Removes the
/// expired entries, adds `member` (`<id>:<requested_at µs>:<name>`) scored by its expiry unless it
/// has expired already, and publishes `message` (the lock's name) on `channel`. Sent again after a
/// dropped connection, it has the same effect, and one more wake.
pub(crate) static INDEX_TRIGGER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if tonumber(ARGV[2]) > now then redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1]) end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
",
    )
});

/// `KEYS[1]` = the triggers index → `{now, member, expires, member, expires, …}`: the entries left
/// after removing those whose expiry is not after the server's now, soonest expiry first.
pub(crate) static PENDING_TRIGGERS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
table.insert(out, 1, now)
return out
",
    )
});

/// `KEYS[1]` = the triggers index, `ARGV[1]` = `<id>:` → how many entries it removed: those of the
/// trigger `id`, and the expired ones. The index holds pending triggers only, so reading it whole
/// is cheap.
pub(crate) static UNINDEX_TRIGGER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local removed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local prefix = ARGV[1]
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.sub(member, 1, #prefix) == prefix then
    removed = removed + redis.call('ZREM', KEYS[1], member)
  end
end
return removed
",
    )
});

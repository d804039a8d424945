#!/usr/bin/env bash
# A prototype, not the provider: how much of one Postgres backend's CPU the fires of 20 instants
# of 1,000 jobs cost when every statement handles one job (today's claim, as the provider sends it
# for a Java table without the token and pause columns, sent as literal SQL) against one statement
# per replica and instant for all the jobs (a batch claim, as issue 31's `claim_fires` could send
# it). Per instant, as three replicas and the winner's release would: a winning claim, two losing
# claims, a release (simpler than the provider's: `lock_until = now`, committed synchronously).
# BENCHMARKS.md, "What bounds the lateness at 1,000 jobs", has a run's figures and what the
# prototype leaves out.
#
# Usage: bench/prototypes/pg_batch_claim.sh [postgres URL]   (default: SHEDLOCK_PG_URL, or the
# test database on 127.0.0.1). Needs psql and python3; it creates and drops the table
# proto_locks. It reads the backend's CPU from /proc, so the server must run on this host.
set -euo pipefail
url=${1:-${SHEDLOCK_PG_URL:-postgres://postgres@127.0.0.1:5432/test}}
dir=$(mktemp -d)
trap 'rm -rf "$dir"; psql -X -q "$url" -c "DROP TABLE IF EXISTS proto_locks" >/dev/null 2>&1 || true' EXIT

python3 - "$dir" <<'EOF'
import sys
out = sys.argv[1]
N, K = 1000, 20
now = "(now() AT TIME ZONE 'utc')"
far = "2100-01-01 00:00:00"
single_claim = (
    "WITH seen (f, u, b, a, t) AS (SELECT last_fire, lock_until, locked_by, locked_at, NULL::bigint "
    "FROM proto_locks WHERE name = '{n}'), "
    "claimed AS (UPDATE proto_locks SET locked_by = '{o}', locked_at = {now}, "
    "lock_until = {now} + interval '10 s', last_fire = '{f}' "
    "WHERE name = '{n}' AND '{f}' <= {now} AND {now} < '{x}' AND lock_until <= {now} "
    "AND (last_fire IS NULL OR last_fire < '{f}') RETURNING locked_at, lock_until, NULL::bigint), "
    "created AS (INSERT INTO proto_locks (name, lock_until, locked_at, locked_by, last_fire) "
    "SELECT '{n}', {now} + interval '10 s', {now}, '{o}', '{f}' "
    "WHERE '{f}' <= {now} AND {now} < '{x}' AND NOT EXISTS (SELECT 1 FROM seen) "
    "ON CONFLICT (name) DO NOTHING RETURNING locked_at, lock_until, NULL::bigint), "
    "won AS (SELECT * FROM claimed UNION ALL SELECT * FROM created) "
    "SELECT now(), seen.f, seen.u, seen.b, seen.a, seen.t, won.* "
    "FROM (SELECT 1) AS one LEFT JOIN seen ON true LEFT JOIN won ON true;"
)
single_release = (
    "UPDATE proto_locks SET lock_until = {now} WHERE name = '{n}' AND locked_by = '{o}' "
    "AND lock_until > {now};"
)
batch_claim = (
    "WITH req(name) AS (SELECT unnest(ARRAY[{names}]::varchar[])), "
    "seen AS (SELECT t.name, t.last_fire AS f, t.lock_until AS u, t.locked_by AS b, "
    "t.locked_at AS a FROM proto_locks t JOIN req USING (name)), "
    "claimed AS (UPDATE proto_locks t SET locked_by = '{o}', locked_at = {now}, "
    "lock_until = {now} + interval '10 s', last_fire = '{f}' "
    "FROM (SELECT name FROM req ORDER BY name) r WHERE t.name = r.name AND '{f}' <= {now} "
    "AND {now} < '{x}' AND t.lock_until <= {now} AND (t.last_fire IS NULL OR t.last_fire < '{f}') "
    "RETURNING t.name, t.locked_at, t.lock_until) "
    "SELECT req.name, now(), seen.f, seen.u, seen.b, seen.a, claimed.locked_at, claimed.lock_until "
    "FROM req LEFT JOIN seen USING (name) LEFT JOIN claimed USING (name);"
)
batch_release = (
    "UPDATE proto_locks t SET lock_until = {now} FROM unnest(ARRAY[{names}]::varchar[]) AS r(name) "
    "WHERE t.name = r.name AND t.locked_by = '{o}' AND t.lock_until > {now};"
)
names = [f"job-{i:04d}" for i in range(N)]
quoted = ",".join(f"'{n}'" for n in names)
with open(f"{out}/single.sql", "w") as s, open(f"{out}/batch.sql", "w") as b:
    for k in range(K):
        f = f"2020-01-01 00:00:{k:02d}"
        for o in ["winner", "loser-1", "loser-2"]:
            for n in names:
                s.write(single_claim.format(n=n, o=o, f=f, x=far, now=now) + "\n")
            b.write(batch_claim.format(names=quoted, o=o, f=f, x=far, now=now) + "\n")
        for n in names:
            s.write(single_release.format(n=n, o="winner", now=now) + "\n")
        b.write(batch_release.format(names=quoted, o="winner", now=now) + "\n")
with open(f"{out}/setup.sql", "w") as f:
    f.write(
        "SET client_min_messages TO warning; "
        "DROP TABLE IF EXISTS proto_locks; CREATE TABLE proto_locks (name VARCHAR(64) PRIMARY KEY, "
        "lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, "
        "last_fire TIMESTAMP NULL);\n"
        f"INSERT INTO proto_locks SELECT 'job-' || lpad(i::text, 4, '0'), {now} - interval '1 h', "
        f"{now} - interval '1 h', 'x', NULL FROM generate_series(0, {N - 1}) i;\n"
    )
EOF

# One session per mode; the backend's user + system CPU (clock ticks) before and after.
ticks=$(getconf CLK_TCK)
measure() {
  rm -f "$dir/before" "$dir/after"
  psql -X -q -v ON_ERROR_STOP=1 "$url" -f "$dir/setup.sql"
  {
    echo "SELECT pg_backend_pid() AS pid \\gset"
    echo "\\setenv PID :pid"
    # Only a postgres process of this host: in a container the backend's pid is not this host's.
    echo "\\! grep -qx postgres /proc/\$PID/comm && awk '{print \$14+\$15}' /proc/\$PID/stat > $dir/before"
    echo "\\o /dev/null"
    cat "$dir/$1.sql"
    echo "\\o"
    echo "\\! grep -qx postgres /proc/\$PID/comm && awk '{print \$14+\$15}' /proc/\$PID/stat > $dir/after"
  } >"$dir/run-$1.sql"
  local start end
  start=$(date +%s%N)
  psql -X -q -v ON_ERROR_STOP=1 "$url" -f "$dir/run-$1.sql"
  end=$(date +%s%N)
  local before after
  before=$(cat "$dir/before" 2>/dev/null || true)
  after=$(cat "$dir/after" 2>/dev/null || true)
  if ! [[ $before =~ ^[0-9]+$ && $after =~ ^[0-9]+$ ]]; then
    echo "could not read the backend's CPU from /proc (is the server on this host?)" >&2
    exit 1
  fi
  local cpu=$(( after - before ))
  # 20 instants x 1,000 fires.
  awk -v m="$1" -v c="$cpu" -v t="$ticks" -v w=$(( (end - start) / 1000000 )) 'BEGIN {
    printf "%-6s backend CPU %6.2f s = %7.1f us per fire; wall %6d ms = %6.1f ms per instant\n",
      m, c / t, c / t / 20000 * 1e6, w, w / 20 }'
}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
measure batch
measure single
measure batch
measure single
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# A prototype, not the provider: how much of one Postgres backend's CPU the fires of 20 instants
# of 1,000 jobs cost, per way of claiming them. Per instant, as three replicas and the winner's
# release would: a winning claim, two losing claims, a release (simpler than the provider's:
# `lock_until = now`, committed synchronously). The claim is today's, as the provider sends it for
# a Java table without the token and pause columns. The modes:
#
#   single      one statement per job, sent as literal SQL (parsed and planned each time);
#   batch       one statement per replica and instant for all the jobs (a batch claim, as issue
#               31's `claim_fires` could send it), literal SQL;
#   p-single    `single` as prepared statements (`PREPARE` once, then `EXECUTE` with literal
#               arguments, which Postgres parses each time: cheaper than planning, dearer than the
#               provider's bind of a named statement);
#   p-batch     `batch` prepared, the names an `ARRAY[...]` of literals in each `EXECUTE`;
#   p-read      the read-first skip, prepared: each replica reads the row by its key and
#               claims only a free row, so the winner sends a read and the claim and each loser
#               one read. Its best case: the losers read after the winner's claim committed;
#   p-race      read first, its worst case: the three replicas read before any claim (they fire
#               at the same instant of the store's clock), see the row free, and all claim.
#
# BENCHMARKS.md, "What bounds the lateness at 1,000 jobs", has runs' figures and what the
# prototype leaves out.
#
# Usage: bench/prototypes/pg_batch_claim.sh [postgres URL]   (default: SHEDLOCK_PG_URL, or the
# test database on 127.0.0.1). Needs psql and python3; it creates and drops the table
# proto_locks. It reads the backend's CPU from /proc, so the server must run on this host.
set -euo pipefail
url=${1:-${SHEDLOCK_PG_URL:-postgres://postgres@127.0.0.1:5432/test}}
# PROTO_JOBS and PROTO_INSTANTS shrink it for a quick try; PROTO_MODES picks modes;
# PROTO_PLAN_CACHE_MODE sets Postgres's plan_cache_mode (auto: a prepared statement gets a generic
# plan after five runs when it seems no worse; force_custom_plan: planned for each run's values).
jobs=${PROTO_JOBS:-1000}
instants=${PROTO_INSTANTS:-20}
modes=${PROTO_MODES:-batch single p-batch p-single p-read p-race}
plan_cache_mode=${PROTO_PLAN_CACHE_MODE:-auto}
dir=$(mktemp -d)
trap 'rm -rf "$dir"; psql -X -q "$url" -c "DROP TABLE IF EXISTS proto_locks" >/dev/null 2>&1 || true' EXIT

python3 - "$dir" "$jobs" "$instants" <<'EOF'
import datetime
import sys
base = datetime.datetime(2020, 1, 1)
out, N, K = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
now = "(now() AT TIME ZONE 'utc')"
far = "2100-01-01 00:00:00"
# Today's claim of one fire: {n} the job, {o} the replica, {f} the fire, {x} its window's end.
claim = (
    "WITH seen (f, u, b, a, t) AS (SELECT last_fire, lock_until, locked_by, locked_at, NULL::bigint "
    "FROM proto_locks WHERE name = {n}), "
    "claimed AS (UPDATE proto_locks SET locked_by = {o}, locked_at = {now}, "
    "lock_until = {now} + interval '10 s', last_fire = {f} "
    "WHERE name = {n} AND {f} <= {now} AND {now} < {x} AND lock_until <= {now} "
    "AND (last_fire IS NULL OR last_fire < {f}) RETURNING locked_at, lock_until, NULL::bigint), "
    "created AS (INSERT INTO proto_locks (name, lock_until, locked_at, locked_by, last_fire) "
    "SELECT {n}, {now} + interval '10 s', {now}, {o}, {f} "
    "WHERE {f} <= {now} AND {now} < {x} AND NOT EXISTS (SELECT 1 FROM seen) "
    "ON CONFLICT (name) DO NOTHING RETURNING locked_at, lock_until, NULL::bigint), "
    "won AS (SELECT * FROM claimed UNION ALL SELECT * FROM created) "
    "SELECT now(), seen.f, seen.u, seen.b, seen.a, seen.t, won.* "
    "FROM (SELECT 1) AS one LEFT JOIN seen ON true LEFT JOIN won ON true"
)
release = (
    "UPDATE proto_locks SET lock_until = {now} WHERE name = {n} AND locked_by = {o} "
    "AND lock_until > {now}"
)
read = "SELECT now(), last_fire, lock_until, locked_by, locked_at FROM proto_locks WHERE name = {n}"
batch_claim = (
    "WITH req(name) AS (SELECT unnest({ns}::varchar[])), "
    "seen AS (SELECT t.name, t.last_fire AS f, t.lock_until AS u, t.locked_by AS b, "
    "t.locked_at AS a FROM proto_locks t JOIN req USING (name)), "
    "claimed AS (UPDATE proto_locks t SET locked_by = {o}, locked_at = {now}, "
    "lock_until = {now} + interval '10 s', last_fire = {f} "
    "FROM (SELECT name FROM req ORDER BY name) r WHERE t.name = r.name AND {f} <= {now} "
    "AND {now} < {x} AND t.lock_until <= {now} AND (t.last_fire IS NULL OR t.last_fire < {f}) "
    "RETURNING t.name, t.locked_at, t.lock_until) "
    "SELECT req.name, now(), seen.f, seen.u, seen.b, seen.a, claimed.locked_at, claimed.lock_until "
    "FROM req LEFT JOIN seen USING (name) LEFT JOIN claimed USING (name)"
)
batch_release = (
    "UPDATE proto_locks t SET lock_until = {now} FROM unnest({ns}::varchar[]) AS r(name) "
    "WHERE t.name = r.name AND t.locked_by = {o} AND t.lock_until > {now}"
)
lit = lambda v: f"'{v}'"
names = [f"job-{i:04d}" for i in range(N)]
array = "ARRAY[" + ",".join(lit(n) for n in names) + "]"
# Prepared once per session, before its CPU is read.
prepare = "".join(
    f"PREPARE {name} AS {sql.format(n='$1', ns='$1', o='$2', f='$3::timestamp', x='$4::timestamp', now=now)};\n"
    for name, sql in [
        ("claim", claim), ("bclaim", batch_claim), ("rd", read),
        ("rel", release.replace("{o}", "$2")), ("brel", batch_release.replace("{o}", "$2")),
    ]
)
modes = {m: [] for m in ["single", "batch", "p-single", "p-batch", "p-read", "p-race"]}
for k in range(K):
    f = (base + datetime.timedelta(seconds=k)).strftime("%Y-%m-%d %H:%M:%S")
    args = lambda n, o: f"({lit(n)}, {lit(o)}, {lit(f)}, {lit(far)})"
    for n in names:
        modes["p-race"].extend(f"EXECUTE rd({lit(n)})" for _ in range(3))
    for o in ["winner", "loser-1", "loser-2"]:
        for n in names:
            modes["p-race"].append(f"EXECUTE claim{args(n, o)}")
            modes["single"].append(claim.format(n=lit(n), o=lit(o), f=lit(f), x=lit(far), now=now))
            modes["p-single"].append(f"EXECUTE claim{args(n, o)}")
            modes["p-read"].append(f"EXECUTE rd({lit(n)})")
            if o == "winner":
                modes["p-read"].append(f"EXECUTE claim{args(n, o)}")
        modes["batch"].append(
            batch_claim.format(ns=array, o=lit(o), f=lit(f), x=lit(far), now=now))
        modes["p-batch"].append(f"EXECUTE bclaim({array}, {lit(o)}, {lit(f)}, {lit(far)})")
    for n in names:
        modes["single"].append(release.format(n=lit(n), o=lit("winner"), now=now))
        for m in ["p-single", "p-read", "p-race"]:
            modes[m].append(f"EXECUTE rel({lit(n)}, 'winner')")
    modes["batch"].append(batch_release.format(ns=array, o=lit("winner"), now=now))
    modes["p-batch"].append(f"EXECUTE brel({array}, 'winner')")
for m, statements in modes.items():
    with open(f"{out}/{m}.sql", "w") as file:
        file.write("".join(q + ";\n" for q in statements))
with open(f"{out}/last", "w") as file:
    file.write(f)
with open(f"{out}/prepare.sql", "w") as file:
    file.write(prepare)
with open(f"{out}/setup.sql", "w") as file:
    file.write(
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
  if [[ ! -f "$dir/$1.sql" ]]; then
    echo "unknown mode $1 (the modes: batch single p-batch p-single p-read p-race)" >&2
    exit 1
  fi
  rm -f "$dir/before" "$dir/after"
  psql -X -q -v ON_ERROR_STOP=1 "$url" -f "$dir/setup.sql"
  {
    echo "SET plan_cache_mode = $plan_cache_mode;"
    cat "$dir/prepare.sql"
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
  # Every job's last instant was won by the winner: the claims did claim.
  local last won
  last=$(cat "$dir/last")
  won=$(psql -X -tA "$url" -c "SELECT count(*) FROM proto_locks WHERE last_fire = '$last' AND locked_by = 'winner'")
  if [[ $won != "$jobs" ]]; then
    echo "$1: the winner holds $won of $jobs jobs' last fire; the claims did not claim" >&2
    exit 1
  fi
  local cpu=$(( after - before ))
  awk -v m="$1" -v c="$cpu" -v t="$ticks" -v w=$(( (end - start) / 1000000 )) \
    -v fires=$(( jobs * instants )) -v k="$instants" 'BEGIN {
    printf "%-8s backend CPU %6.2f s = %7.1f us per fire; wall %6d ms = %6.1f ms per instant\n",
      m, c / t, c / t / fires * 1e6, w, w / k }'
}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in 1 2; do
  for mode in $modes; do
    measure "$mode"
  done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

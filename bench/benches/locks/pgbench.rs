//! The server's side of a skip on Postgres: `pgbench -M prepared`, 32 clients, on a lock another
//! owner holds, running the acquire statement the provider actually sends (captured from sqlx)
//! against Java ShedLock's plain conditional `UPDATE` (`POSTGRES_SQL dbTime=true`), in
//! alternating rounds. pgbench is a C client that keeps the server busy with little CPU of its
//! own, so the ratio is the statements' cost to the server. Without `pgbench` on the `PATH` the
//! comparison is skipped with a notice.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use shedlock_bench::java::Section;
use shedlock_bench::report::{Row, Target};
use shedlock_bench::stats::{median, median_ratio};

use crate::harness::{AT_MOST, FLOOR_OWNER, HELD, Result};

/// Clients, as in issue 16's figure.
const CLIENTS: usize = 32;

/// One script: a label, its statement with pgbench variables, their values.
struct Script {
    label: &'static str,
    sql: String,
    vars: Vec<(String, String)>,
}

/// `sql` with `$n` replaced by `:pn`, and `pn` set to `values[n - 1]`.
fn script(label: &'static str, sql: &str, values: &[String]) -> Result<Script> {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push_str(":p");
            while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                out.push(d);
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    if out.contains('\n') {
        return Err(format!("{label}: a statement pgbench can take is one line").into());
    }
    let vars = values
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("p{}", i + 1), v.clone()))
        .collect();
    Ok(Script {
        label,
        sql: out,
        vars,
    })
}

/// Transactions per second of one pgbench run of `script` for `seconds`.
fn run(url: &str, dir: &Path, script: &Script, seconds: u64) -> Result<f64> {
    let file = dir.join(format!("{}.sql", script.label.replace(' ', "_")));
    std::fs::write(&file, format!("{};\n", script.sql))?;
    let mut cmd = Command::new("pgbench");
    cmd.args(["-n", "-M", "prepared", "-j", "2"])
        .arg("-c")
        .arg(CLIENTS.to_string())
        .arg("-T")
        .arg(seconds.to_string())
        .arg("-f")
        .arg(&file);
    for (name, value) in &script.vars {
        cmd.arg("-D").arg(format!("{name}={value}"));
    }
    let out = cmd.arg(url).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let failed = text
        .lines()
        .find_map(|l| l.strip_prefix("number of failed transactions: "))
        .is_some_and(|l| !l.starts_with("0 "));
    if !out.status.success() || failed {
        return Err(format!(
            "pgbench {}: {}{}",
            script.label,
            text,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    text.lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|tps| tps.parse().ok())
        .ok_or_else(|| format!("pgbench {}: no tps in {text}", script.label).into())
}

/// The skip statement against Java's `UPDATE`, server-side; no rows without pgbench or Java's
/// statements.
pub(crate) async fn skip_throughput(
    url: &str,
    table: &str,
    skip_sql: &str,
    java: Option<&Section>,
    (rounds, seconds): (usize, u64),
) -> Result<Vec<Row>> {
    let db = "postgres";
    if Command::new("pgbench").arg("--version").output().is_err() {
        eprintln!("{db}: no pgbench on the PATH: the server-side skip comparison is left out");
        return Ok(Vec::new());
    }
    let Some(java) = java else {
        eprintln!("{db}: no Java statements: the server-side skip comparison is left out");
        return Ok(Vec::new());
    };
    let update = java.get("UPDATE")?.with_table(table);
    let java_values = update
        .params
        .iter()
        .map(|p| {
            Ok(match p.as_str() {
                "name" => HELD.to_owned(),
                "lockedBy" => FLOOR_OWNER.to_owned(),
                "lockAtMostForInterval" => AT_MOST.as_secs_f64().to_string(),
                other => return Err(format!("unknown Java parameter {other}")),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let at_most = interval_literal(AT_MOST);
    let ours = script(
        "provider skip",
        skip_sql,
        &[at_most, HELD.to_owned(), FLOOR_OWNER.to_owned()],
    )?;
    let theirs = script("java update", &update.sql, &java_values)?;
    let url = url.to_owned();
    let (ours_tps, java_tps) = tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir()?;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which runs first: slow drifts of the machine cancel in the pairs.
            if round % 2 == 0 {
                a.push(run(&url, dir.path(), &ours, seconds)?);
                b.push(run(&url, dir.path(), &theirs, seconds)?);
            } else {
                b.push(run(&url, dir.path(), &theirs, seconds)?);
                a.push(run(&url, dir.path(), &ours, seconds)?);
            }
        }
        Ok::<_, crate::harness::BoxError>((a, b))
    })
    .await??;
    let label = format!("server skip, pgbench {CLIENTS} clients: ");
    Ok(vec![
        Row::new(
            db,
            format!("{label}Java ShedLock's UPDATE"),
            median(&java_tps).unwrap_or(f64::NAN),
            "ops/s",
        ),
        Row::new(
            db,
            format!("{label}provider's acquire statement"),
            median(&ours_tps).unwrap_or(f64::NAN),
            "ops/s",
        ),
        Row::new(
            db,
            format!("{label}provider / Java UPDATE"),
            median_ratio(&ours_tps, &java_tps).unwrap_or(f64::NAN),
            "x",
        )
        .target(Target::ValueAtLeast(0.95)),
    ])
}

/// `d` as a Postgres interval literal without spaces (`600000000 us` would need one).
fn interval_literal(d: Duration) -> String {
    let micros = d.as_micros();
    format!(
        "{:02}:{:02}:{:02}.{:06}",
        micros / 3_600_000_000,
        micros / 60_000_000 % 60,
        micros / 1_000_000 % 60,
        micros % 1_000_000
    )
}

//! The CPU of a store's server on this host, for the `lateness` part: every thread of every
//! process whose command name (`/proc/<pid>/comm`) is the server's, background ones included,
//! read from each thread's `schedstat` (ns on a CPU, readable without privileges).
//!
//! A window's CPU is the sum, over the threads alive at its end, of their CPU less what they
//! had at its start (a thread that started inside the window counts from zero). A thread that
//! ended inside the window takes its share with it: [`Window::ended`] counts them, so a figure
//! that lost some says so. A server that is not on this host, or whose processes `/proc` hides,
//! shows no process: [`Window::processes`] is then 0 and the caller leaves the figures out.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use crate::harness::Result;

/// The CPU so far of each thread of the server's processes, by thread id.
pub(crate) struct Snapshot {
    threads: BTreeMap<u32, u64>,
    processes: usize,
    at: Instant,
}

/// The server's CPU between two snapshots.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    /// CPU of the threads alive at the end, since the start (or their own start), ns.
    pub(crate) ns: u64,
    /// The window's length, s.
    pub(crate) secs: f64,
    /// The server's processes at the end (0: not found, the figures mean nothing).
    pub(crate) processes: usize,
    /// Threads alive at the start and gone at the end: their CPU in the window is missing.
    pub(crate) ended: usize,
}

impl Window {
    /// CPU per second, ns.
    #[allow(clippy::cast_precision_loss)] // ns well below 2^52
    pub(crate) fn rate(self) -> f64 {
        self.ns as f64 / self.secs
    }

    /// CPU (ns) less `background` ns per second over this window's length, at least 0.
    #[allow(clippy::cast_precision_loss)] // ns well below 2^52
    pub(crate) fn net_ns(self, background: f64) -> f64 {
        (self.ns as f64 - background * self.secs).max(0.0)
    }
}

impl Snapshot {
    /// The threads of every process named one of `names`, now.
    pub(crate) fn take(names: &[&str]) -> Result<Self> {
        let mut threads = BTreeMap::new();
        let mut processes = 0;
        for entry in std::fs::read_dir("/proc")? {
            let path = entry?.path();
            let is_pid = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
            if !is_pid {
                continue;
            }
            // A process may end while it is read: it then counts as gone.
            let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
                continue;
            };
            if names.contains(&comm.trim_end()) && read_threads(&path, &mut threads).is_ok() {
                processes += 1;
            }
        }
        Ok(Self {
            threads,
            processes,
            at: Instant::now(),
        })
    }

    /// The server's CPU from `earlier` to this snapshot.
    pub(crate) fn since(&self, earlier: &Self) -> Window {
        let ns = self
            .threads
            .iter()
            .map(|(tid, now)| now.saturating_sub(earlier.threads.get(tid).copied().unwrap_or(0)))
            .sum();
        let ended = earlier
            .threads
            .keys()
            .filter(|tid| !self.threads.contains_key(tid))
            .count();
        Window {
            ns,
            secs: self.at.duration_since(earlier.at).as_secs_f64(),
            processes: self.processes,
            ended,
        }
    }
}

/// Adds each thread of the process at `proc_dir` (`/proc/<pid>`) with its CPU so far (ns).
fn read_threads(proc_dir: &Path, threads: &mut BTreeMap<u32, u64>) -> std::io::Result<()> {
    for task in std::fs::read_dir(proc_dir.join("task"))? {
        let path = task?.path();
        let Some(tid) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A thread that ended meanwhile has no file any more: it counts as gone.
        if let Ok(text) = std::fs::read_to_string(path.join("schedstat"))
            && let Some(ns) = text
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
        {
            threads.insert(tid, ns);
        }
    }
    Ok(())
}

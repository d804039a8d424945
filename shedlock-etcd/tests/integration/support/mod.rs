//! Private etcd processes for tests that count writes or kill members: one or three members on
//! free loopback ports, each in a temporary directory, every process killed when the value is
//! dropped (also when the test panics).

#![allow(dead_code, unreachable_pub, clippy::missing_panics_doc)]

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use shedlock_etcd::testing::etcd_binary;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

pub struct Member {
    pub name: String,
    pub client_port: u16,
    child: Option<Child>,
}

impl Member {
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

/// A private etcd cluster.
pub struct Cluster {
    pub members: Vec<Member>,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts `size` members and waits (up to 30 s) until every one sees a leader. A port picked
    /// free can be taken before etcd binds it (by any process's outgoing connection, whose local
    /// port comes from the same range): a member that exits saying so is started again, with
    /// the whole cluster on new ports, up to three times.
    pub fn start(bin: &str, size: usize) -> Self {
        let mut attempt = 1;
        loop {
            match Self::try_start(bin, size) {
                Ok(cluster) => return cluster,
                Err(log) if attempt < 3 && log.contains("address already in use") => {
                    eprintln!(
                        "etcd could not bind a port picked free; new ports (attempt {attempt})"
                    );
                    attempt += 1;
                }
                Err(log) => panic!("{log}"),
            }
        }
    }

    fn try_start(bin: &str, size: usize) -> Result<Self, String> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
        let initial = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!("shedlock-test-{}", ports[0].0);
        let mut members = Vec::new();
        for (i, (client, peer)) in ports.iter().enumerate() {
            let name = format!("m{i}");
            let log = std::fs::File::create(dir.path().join(format!("{name}.log"))).expect("log");
            let child = Command::new(bin)
                .args(["--name", &name])
                .arg("--data-dir")
                .arg(dir.path().join(&name))
                .args([
                    "--listen-client-urls",
                    &format!("http://127.0.0.1:{client}"),
                ])
                .args([
                    "--advertise-client-urls",
                    &format!("http://127.0.0.1:{client}"),
                ])
                .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
                .args([
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                ])
                .args(["--initial-cluster", &initial])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", &token])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("etcd starts");
            members.push(Member {
                name,
                client_port: *client,
                child: Some(child),
            });
        }
        let mut cluster = Self { members, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        for i in 0..cluster.members.len() {
            loop {
                let m = &cluster.members[i];
                let ready = post(m.client_port, "/v3/maintenance/status", "{}")
                    .ok()
                    .and_then(|s| s["leader"].as_str().map(|l| l != "0"))
                    .unwrap_or(false);
                if ready {
                    break;
                }
                let exited = cluster.members[i]
                    .child
                    .as_mut()
                    .is_some_and(|child| matches!(child.try_wait(), Ok(Some(_))));
                if exited || Instant::now() > deadline {
                    let m = &cluster.members[i];
                    let log =
                        std::fs::read_to_string(cluster.dir.path().join(format!("{}.log", m.name)))
                            .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(15).collect();
                    return Err(format!(
                        "etcd {} did not start; its log ends:\n{}",
                        m.name,
                        tail.join("\n")
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(cluster)
    }

    /// The `etcd://` URL of the members still running.
    pub fn url(&self) -> String {
        let members: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect();
        format!("etcd://{}", members.join(","))
    }

    /// The index of the current leader, as a running member reports it.
    pub fn leader(&self) -> Option<usize> {
        for m in self.members.iter().filter(|m| m.child.is_some()) {
            let Ok(status) = post(m.client_port, "/v3/maintenance/status", "{}") else {
                continue;
            };
            let leader = status["leader"].as_str().unwrap_or("0").to_owned();
            for (i, other) in self.members.iter().enumerate() {
                if other.child.is_none() {
                    continue;
                }
                if let Ok(s) = post(other.client_port, "/v3/maintenance/status", "{}")
                    && s["header"]["member_id"].as_str() == Some(&leader)
                {
                    return Some(i);
                }
            }
        }
        None
    }

    /// kill -9 of member `i` (by its PID), waited for.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A JSON call on any running member.
    pub fn call(&self, path: &str, body: &str) -> Value {
        for m in self.members.iter().filter(|m| m.child.is_some()) {
            if let Ok(v) = post(m.client_port, path, body) {
                return v;
            }
        }
        panic!("no member answered {path}")
    }

    /// The cluster's current revision.
    pub fn revision(&self) -> i64 {
        let v = self.call("/v3/kv/range", r#"{"key":"AA=="}"#);
        v["header"]["revision"]
            .as_str()
            .unwrap_or("0")
            .parse()
            .unwrap()
    }

    /// How many leases exist.
    pub fn lease_count(&self) -> usize {
        let v = self.call("/v3/lease/leases", "{}");
        v["leases"].as_array().map_or(0, Vec::len)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// One blocking JSON POST (HTTP/1.0, connection closed after it).
pub fn post(port: u16, path: &str, body: &str) -> Result<Value, String> {
    post_within(port, path, body, Duration::from_secs(5)).map_err(|e| match e {
        PostFailure::Refused(why) | PostFailure::Failed(why) => why,
    })
}

/// Why [`post_within`] got no answer.
#[derive(Debug)]
pub enum PostFailure {
    /// Nothing listens on the port (a killed member): nothing was sent.
    Refused(String),
    /// The connection, the request or the answer failed, or the answer was not a 200 with JSON.
    Failed(String),
}

/// [`post`] whose connection and answer each take at most `timeout`.
pub fn post_within(
    port: u16,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<Value, PostFailure> {
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(|e| {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            PostFailure::Refused(e.to_string())
        } else {
            PostFailure::Failed(e.to_string())
        }
    })?;
    let failed = |e: &dyn std::fmt::Display| PostFailure::Failed(e.to_string());
    stream.set_read_timeout(Some(timeout)).ok();
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| failed(&e))?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(|e| failed(&e))?;
    let (head, json) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| failed(&"no HTTP body"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(failed(&head.lines().next().unwrap_or_default()));
    }
    serde_json::from_str(json).map_err(|e| failed(&e))
}

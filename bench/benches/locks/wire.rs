//! Round trips counted on the wire: a TCP proxy on a loopback port in front of a server that
//! counts how often the conversation turns from the client's request to the server's answer.
//! Protocol-blind, so it counts the same thing for Postgres, MariaDB, Redis and etcd's HTTP
//! gateway: one round trip per request the client waits for (a pipelined batch is one), and
//! also the work the client does in the background (sqlx's ping of a connection given back to
//! its pool, a reconnection's handshake).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::harness::Result;

/// Which way a connection's last bytes went.
const IDLE: u8 = 0;
const ASKED: u8 = 1;
const ANSWERED: u8 = 2;

/// A counting proxy; it stops when dropped.
pub(crate) struct Proxy {
    port: u16,
    trips: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free loopback port forwarding to `target` (`host:port`).
    pub(crate) async fn start(target: String) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let trips = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let (t, b) = (trips.clone(), bytes.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (target, trips, bytes) = (target.clone(), t.clone(), b.clone());
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&target).await {
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        forward(client, server, &trips, &bytes).await;
                    }
                });
            }
        });
        Ok(Self {
            port,
            trips,
            bytes,
            task,
        })
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Round trips and bytes (both ways) so far, on all connections.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.trips.load(Ordering::SeqCst),
            self.bytes.load(Ordering::SeqCst),
        )
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies both ways until either side closes; a round trip is counted when the server
/// answers after the client asked.
async fn forward(client: TcpStream, server: TcpStream, trips: &AtomicU64, bytes: &AtomicU64) {
    let state = AtomicU8::new(IDLE);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let pump = async |from: &mut tokio::net::tcp::OwnedReadHalf,
                      to: &mut tokio::net::tcp::OwnedWriteHalf,
                      asking: bool| {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            bytes.fetch_add(n as u64, Ordering::SeqCst);
            if asking {
                state.store(ASKED, Ordering::SeqCst);
            } else if state.swap(ANSWERED, Ordering::SeqCst) == ASKED {
                trips.fetch_add(1, Ordering::SeqCst);
            }
            if to.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(
        pump(&mut client_read, &mut server_write, true),
        pump(&mut server_read, &mut client_write, false),
    );
}

/// Where `url` points: its first `host:port` (after `//` and any credentials).
fn authority(url: &str) -> Result<(usize, &str)> {
    let start = url.find("//").ok_or("no // in the URL")? + 2;
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', ',']).unwrap_or(rest.len())];
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    if !host_port.contains(':') {
        return Err(format!("the URL {url} names no port").into());
    }
    Ok((start + authority.len() - host_port.len(), host_port))
}

/// The `host:port` a proxy for `url` forwards to.
pub(crate) fn target(url: &str) -> Result<String> {
    Ok(authority(url)?.1.to_owned())
}

/// `url` with its `host:port` replaced by the proxy's on `port`.
pub(crate) fn through(url: &str, port: u16) -> Result<String> {
    let (at, host_port) = authority(url)?;
    Ok(format!(
        "{}127.0.0.1:{port}{}",
        &url[..at],
        &url[at + host_port.len()..]
    ))
}

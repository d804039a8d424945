//! A small TCP proxy on 127.0.0.1 that can black-hole, heal and cut connections, to test what a
//! client does when its database stops answering.
//!
//! - **pass** (the initial mode): bytes flow both ways.
//! - [`Proxy::blackhole`]: every connection, open or new, is accepted and read, but nothing is
//!   forwarded and nothing is closed, as when a network path silently drops packets. A client
//!   only notices through its own timeouts (TCP alone takes many minutes).
//! - [`Proxy::heal`]: new connections pass again. Connections that were black-holed stay dead
//!   (their bytes are gone, as they would be), so a client that reuses one will hang: this is how
//!   a test proves timed-out connections are not reused.
//! - [`Proxy::cut`]: resets (TCP RST) every open connection, as a crashed middlebox would, and
//!   waits until they are all gone.
//!
//! Dropping the proxy closes the listener and every connection.
//!
//! ```no_run
//! use shedlock_tests::proxy::Proxy;
//!
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! let proxy = Proxy::to_local_port(5432).await?;
//! let url = format!("postgres://postgres@127.0.0.1:{}/test", proxy.port());
//! proxy.blackhole(); // calls through `url` now hang until their timeout
//! proxy.heal(); // new connections work again
//! # let _ = url; Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

const BUFFER: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Control {
    blackhole: bool,
    /// Incremented by every [`Proxy::cut`]; a connection that sees a change resets itself.
    cut_epoch: u64,
}

/// A TCP proxy from a port on 127.0.0.1 to an upstream address; see the [module](self) docs.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    control: watch::Sender<Control>,
    counters: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicUsize,
    open: AtomicUsize,
    /// Open connections by the cut epoch they were accepted in.
    by_epoch: Mutex<BTreeMap<u64, usize>>,
    /// Signalled whenever a connection ends.
    ended: Notify,
}

impl Counters {
    fn opened(&self, epoch: u64) {
        self.accepted.fetch_add(1, Ordering::SeqCst);
        self.open.fetch_add(1, Ordering::SeqCst);
        *self.lock_epochs().entry(epoch).or_default() += 1;
    }

    fn closed(&self, epoch: u64) {
        self.open.fetch_sub(1, Ordering::SeqCst);
        let mut epochs = self.lock_epochs();
        if let Some(n) = epochs.get_mut(&epoch) {
            *n -= 1;
            if *n == 0 {
                epochs.remove(&epoch);
            }
        }
        drop(epochs);
        self.ended.notify_waiters();
    }

    fn open_before(&self, epoch: u64) -> usize {
        self.lock_epochs().range(..epoch).map(|(_, n)| n).sum()
    }

    fn lock_epochs(&self) -> MutexGuard<'_, BTreeMap<u64, usize>> {
        self.by_epoch.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Proxy {
    /// Starts a proxy on a free port of 127.0.0.1 that forwards to `upstream`.
    ///
    /// # Errors
    ///
    /// The listening socket could not be bound.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (control, rx) = watch::channel(Control {
            blackhole: false,
            cut_epoch: 0,
        });
        let counters = Arc::new(Counters::default());
        tokio::spawn(accept_loop(listener, upstream, rx, counters.clone()));
        tracing::debug!(%addr, %upstream, "proxy started");
        Ok(Self {
            addr,
            control,
            counters,
        })
    }

    /// [`start`](Self::start) towards `127.0.0.1:port`.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub async fn to_local_port(port: u16) -> io::Result<Self> {
        Self::start(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await
    }

    /// The proxy's own address (connect here).
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's port on 127.0.0.1.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Black-holes all traffic: open and new connections are read but nothing is forwarded or
    /// closed. Connections open now stay black-holed after [`heal`](Self::heal).
    pub fn blackhole(&self) {
        self.control.send_modify(|c| c.blackhole = true);
        tracing::debug!(addr = %self.addr, "proxy black-holed");
    }

    /// Lets new connections through again.
    pub fn heal(&self) {
        self.control.send_modify(|c| c.blackhole = false);
        tracing::debug!(addr = %self.addr, "proxy healed");
    }

    /// Resets (TCP RST) every connection open now, black-holed or not, and waits until they are
    /// all closed. The mode is unchanged; connections accepted from now on are not affected.
    pub async fn cut(&self) {
        let mut epoch = 0;
        self.control.send_modify(|c| {
            c.cut_epoch += 1;
            epoch = c.cut_epoch;
        });
        loop {
            let ended = self.counters.ended.notified();
            if self.counters.open_before(epoch) == 0 {
                break;
            }
            ended.await;
        }
        tracing::debug!(addr = %self.addr, "proxy cut its connections");
    }

    /// Whether the proxy is black-holing.
    #[must_use]
    pub fn is_blackholed(&self) -> bool {
        self.control.borrow().blackhole
    }

    /// How many client connections were accepted so far.
    #[must_use]
    pub fn accepted(&self) -> usize {
        self.counters.accepted.load(Ordering::SeqCst)
    }

    /// How many client connections are open now (including black-holed ones).
    #[must_use]
    pub fn open(&self) -> usize {
        self.counters.open.load(Ordering::SeqCst)
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    mut control: watch::Receiver<Control>,
    counters: Arc<Counters>,
) {
    loop {
        tokio::select! {
            changed = control.changed() => {
                if changed.is_err() {
                    return; // the Proxy was dropped
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    let epoch = control.borrow().cut_epoch;
                    counters.opened(epoch);
                    let control = control.clone();
                    let counters = counters.clone();
                    tokio::spawn(async move {
                        serve(client, upstream, control, epoch).await;
                        counters.closed(epoch);
                    });
                }
                Err(error) => tracing::warn!(%error, "proxy accept failed"),
            },
        }
    }
}

/// How a pumping phase ended.
enum End {
    /// A side closed or failed, or the proxy was dropped: close both.
    Closed,
    /// [`Proxy::cut`]: reset both.
    Cut,
    /// [`Proxy::blackhole`]: keep both open, forward nothing.
    Blackhole,
}

async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    mut control: watch::Receiver<Control>,
    epoch: u64,
) {
    let start = *control.borrow_and_update();
    let mut client = client;
    if start.cut_epoch != epoch {
        reset(&client); // cut between accept and now
        return;
    }
    if start.blackhole {
        if let End::Cut = sink(&mut client, None, &mut control, epoch).await {
            reset(&client);
        }
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        // Upstream refused: pass that on as a reset, like a refused connection.
        reset(&client);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    match pump(&mut client, &mut server, &mut control, epoch).await {
        End::Closed => {}
        End::Cut => {
            reset(&client);
            reset(&server);
        }
        End::Blackhole => {
            if let End::Cut = sink(&mut client, Some(&mut server), &mut control, epoch).await {
                reset(&client);
                reset(&server);
            }
        }
    }
}

/// Forwards both ways until a side closes or the control says otherwise.
async fn pump(
    client: &mut TcpStream,
    server: &mut TcpStream,
    control: &mut watch::Receiver<Control>,
    epoch: u64,
) -> End {
    let (mut client_rx, mut client_tx) = client.split();
    let (mut server_rx, mut server_tx) = server.split();
    let mut up = vec![0_u8; BUFFER];
    let mut down = vec![0_u8; BUFFER];
    loop {
        tokio::select! {
            biased;
            changed = control.changed() => {
                if changed.is_err() {
                    return End::Closed;
                }
                let now = *control.borrow_and_update();
                if now.cut_epoch != epoch {
                    return End::Cut;
                }
                if now.blackhole {
                    return End::Blackhole;
                }
            }
            read = client_rx.read(&mut up) => match read {
                Ok(0) | Err(_) => return End::Closed,
                Ok(n) => {
                    if control.borrow().blackhole {
                        return End::Blackhole; // these bytes are lost, as in a real black hole
                    }
                    if server_tx.write_all(&up[..n]).await.is_err() {
                        return End::Closed;
                    }
                }
            },
            read = server_rx.read(&mut down) => match read {
                Ok(0) | Err(_) => return End::Closed,
                Ok(n) => {
                    if control.borrow().blackhole {
                        return End::Blackhole;
                    }
                    if client_tx.write_all(&down[..n]).await.is_err() {
                        return End::Closed;
                    }
                }
            },
        }
    }
}

/// Reads and discards from both sides, never writes and never closes, until the proxy is dropped
/// ([`End::Closed`]) or cut ([`End::Cut`]). Healing does not revive the connection.
async fn sink(
    client: &mut TcpStream,
    mut server: Option<&mut TcpStream>,
    control: &mut watch::Receiver<Control>,
    epoch: u64,
) -> End {
    let mut client_open = true;
    let mut server_open = server.is_some();
    let mut buf = vec![0_u8; BUFFER];
    let mut buf2 = vec![0_u8; BUFFER];
    loop {
        tokio::select! {
            biased;
            changed = control.changed() => {
                if changed.is_err() {
                    return End::Closed;
                }
                if control.borrow_and_update().cut_epoch != epoch {
                    return End::Cut;
                }
            }
            read = client.read(&mut buf), if client_open => {
                if matches!(read, Ok(0) | Err(_)) {
                    client_open = false;
                }
            }
            read = async {
                match server.as_deref_mut() {
                    Some(s) => s.read(&mut buf2).await,
                    None => std::future::pending().await,
                }
            }, if server_open => {
                if matches!(read, Ok(0) | Err(_)) {
                    server_open = false;
                }
            }
        }
    }
}

/// Makes the coming close a reset (RST) instead of an orderly FIN.
fn reset(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use tokio::time::timeout;

    const WAIT: Duration = Duration::from_secs(5);

    /// An upstream that echoes every byte back.
    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut rx, mut tx) = conn.split();
                    let _ = tokio::io::copy(&mut rx, &mut tx).await;
                });
            }
        });
        addr
    }

    async fn round_trip(stream: &mut TcpStream, msg: &[u8]) -> io::Result<Vec<u8>> {
        stream.write_all(msg).await?;
        let mut got = vec![0_u8; msg.len()];
        stream.read_exact(&mut got).await?;
        Ok(got)
    }

    #[tokio::test]
    async fn passes_blackholes_heals_and_cuts() {
        let proxy = Proxy::start(echo_server().await).await.expect("proxy");
        let mut first = TcpStream::connect(proxy.addr()).await.expect("connect");
        let got = timeout(WAIT, round_trip(&mut first, b"hello")).await;
        assert_eq!(got.expect("in time").expect("echo"), b"hello");

        proxy.blackhole();
        assert!(proxy.is_blackholed());
        // Open connection: nothing comes back, and it is not closed either.
        let stuck = timeout(Duration::from_millis(300), round_trip(&mut first, b"x")).await;
        assert!(
            stuck.is_err(),
            "a black-holed connection must hang, got {stuck:?}"
        );
        // New connection: accepted, then nothing.
        let mut second = TcpStream::connect(proxy.addr()).await.expect("accepted");
        let stuck = timeout(Duration::from_millis(300), round_trip(&mut second, b"y")).await;
        assert!(stuck.is_err(), "a new black-holed connection must hang");

        proxy.heal();
        let mut third = TcpStream::connect(proxy.addr()).await.expect("connect");
        let got = timeout(WAIT, round_trip(&mut third, b"again")).await;
        assert_eq!(got.expect("in time").expect("echo"), b"again");
        // The old connections stay dead after healing.
        let stuck = timeout(Duration::from_millis(300), round_trip(&mut first, b"z")).await;
        assert!(
            stuck.is_err(),
            "a healed proxy must not revive black-holed connections"
        );
        assert_eq!(proxy.accepted(), 3);

        timeout(WAIT, proxy.cut()).await.expect("the cut completes");
        assert_eq!(proxy.open(), 0);
        for conn in [&mut first, &mut second, &mut third] {
            let mut byte = [0_u8; 1];
            let read = timeout(WAIT, conn.read(&mut byte))
                .await
                .expect("cut is prompt");
            assert!(
                matches!(read, Ok(0))
                    || read
                        .as_ref()
                        .is_err_and(|e| e.kind() == io::ErrorKind::ConnectionReset),
                "a cut connection must end, got {read:?}"
            );
        }
        // New connections are not affected by an earlier cut.
        let mut fourth = TcpStream::connect(proxy.addr()).await.expect("connect");
        let got = timeout(WAIT, round_trip(&mut fourth, b"after cut")).await;
        assert_eq!(got.expect("in time").expect("echo"), b"after cut");
    }

    #[tokio::test]
    async fn refused_upstream_is_a_closed_connection() {
        // Bind and drop to find a port with nobody listening.
        let dead = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind")
            .local_addr()
            .expect("addr");
        let proxy = Proxy::start(dead).await.expect("proxy");
        let mut conn = TcpStream::connect(proxy.addr()).await.expect("accepted");
        let mut byte = [0_u8; 1];
        let read = timeout(WAIT, conn.read(&mut byte)).await.expect("prompt");
        assert!(matches!(read, Ok(0) | Err(_)), "got {read:?}");
    }

    #[tokio::test]
    async fn dropping_the_proxy_closes_everything() {
        let proxy = Proxy::start(echo_server().await).await.expect("proxy");
        let addr = proxy.addr();
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        proxy.blackhole();
        drop(proxy);
        let mut byte = [0_u8; 1];
        let read = timeout(WAIT, conn.read(&mut byte))
            .await
            .expect("closed promptly");
        assert!(matches!(read, Ok(0) | Err(_)), "got {read:?}");
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            // The listener goes away with its task; poll until connecting fails.
            if TcpStream::connect(addr).await.is_err() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "listener still open"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

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
//! - [`Proxy::cut_next_reply`]: a one-shot. The next bytes that arrive from upstream, on any
//!   connection, are dropped and that connection is reset (client and upstream side), so the
//!   server got the request and answered, and the client never sees the answer: a **lost
//!   reply**. Every other connection, and everything before and after, passes.
//!   [`Proxy::cut_reply_to`] aims it: the reply to the next request that contains given bytes
//!   (an owner id, a lock name) is cut, and other requests and replies pass, so a call of
//!   several statements can lose the reply of the one it chooses. Neither involves timing: the
//!   bytes are dropped whenever they come, and a client only learns of it by the reset.
//!   [`Proxy::replies_cut`] counts the replies cut, [`Proxy::is_armed`] tells whether the
//!   one-shot is still armed, and [`Proxy::disarm`] takes it back.
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

/// Which reply [`Proxy::cut_next_reply`] or [`Proxy::cut_reply_to`] armed the proxy to cut.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Trigger {
    /// The next bytes from upstream, on any connection.
    Next,
    /// The reply to the next request (client bytes) containing these bytes.
    After(Vec<u8>),
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicUsize,
    open: AtomicUsize,
    /// The armed one-shot, until a connection takes it.
    trigger: Mutex<Option<Trigger>>,
    /// Replies cut so far.
    replies_cut: AtomicUsize,
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

    fn lock_trigger(&self) -> MutexGuard<'_, Option<Trigger>> {
        self.trigger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the one-shot if it is armed for the next reply (on a connection that has upstream
    /// bytes in hand).
    fn take_next(&self) -> bool {
        let mut trigger = self.lock_trigger();
        if *trigger == Some(Trigger::Next) {
            *trigger = None;
            true
        } else {
            false
        }
    }

    /// Takes the one-shot if it is armed for a request containing bytes that `window` (the
    /// connection's last client bytes, this read's included) contains.
    fn take_request(&self, window: &[u8]) -> bool {
        let mut trigger = self.lock_trigger();
        let hit = matches!(
            &*trigger,
            Some(Trigger::After(needle)) if window.windows(needle.len()).any(|w| w == needle)
        );
        if hit {
            *trigger = None;
        }
        hit
    }

    /// How many bytes of the client's stream a connection keeps to find an armed pattern that
    /// straddles two reads (the pattern's length less one).
    fn keep(&self) -> usize {
        match &*self.lock_trigger() {
            Some(Trigger::After(needle)) => needle.len().saturating_sub(1),
            _ => 0,
        }
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

    /// Arms a one-shot: the next bytes that arrive from upstream, on whichever connection, are
    /// dropped, and that connection is reset at once (TCP RST to the client, and to the
    /// server). The server has seen the request and answered; the client never sees the answer.
    /// Nothing else changes: other connections, later bytes and new connections pass. Replaces
    /// an armed one-shot not yet used.
    ///
    /// Make sure the reply to cut is the next one: a connection opened afterwards may get a
    /// greeting from the server first (MySQL/MariaDB), and a client may prepare a statement in
    /// a round trip of its own the first time it runs it; warm the connection and the
    /// statement, or use [`cut_reply_to`](Self::cut_reply_to).
    pub fn cut_next_reply(&self) {
        *self.counters.lock_trigger() = Some(Trigger::Next);
        tracing::debug!(addr = %self.addr, "proxy armed to cut the next reply");
    }

    /// Arms a one-shot like [`cut_next_reply`](Self::cut_next_reply), for the reply to the
    /// next request that contains `request` (non-empty): once bytes containing it pass from a
    /// client to the server, that connection's next bytes from upstream are dropped and it is
    /// reset. Requests without it, and their replies, pass. The bytes may span several reads.
    ///
    /// # Panics
    ///
    /// If `request` is empty.
    pub fn cut_reply_to(&self, request: impl Into<Vec<u8>>) {
        let request = request.into();
        assert!(!request.is_empty(), "cut_reply_to needs bytes to look for");
        *self.counters.lock_trigger() = Some(Trigger::After(request));
        tracing::debug!(addr = %self.addr, "proxy armed to cut a reply");
    }

    /// Whether a one-shot is armed and not used yet.
    #[must_use]
    pub fn is_armed(&self) -> bool {
        self.counters.lock_trigger().is_some()
    }

    /// Takes back an armed one-shot not used yet (nothing happens if there is none).
    pub fn disarm(&self) {
        self.counters.lock_trigger().take();
    }

    /// How many replies were cut so far ([`cut_next_reply`](Self::cut_next_reply),
    /// [`cut_reply_to`](Self::cut_reply_to)).
    #[must_use]
    pub fn replies_cut(&self) -> usize {
        self.counters.replies_cut.load(Ordering::SeqCst)
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
                        serve(client, upstream, control, epoch, &counters).await;
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
    /// [`Proxy::cut`], or a cut reply ([`Proxy::cut_next_reply`]): reset both.
    Cut,
    /// [`Proxy::blackhole`]: keep both open, forward nothing.
    Blackhole,
}

async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    mut control: watch::Receiver<Control>,
    epoch: u64,
    counters: &Counters,
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
    match pump(&mut client, &mut server, &mut control, epoch, counters).await {
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

/// Forwards both ways until a side closes, the control says otherwise, or this connection
/// takes an armed reply cut.
async fn pump(
    client: &mut TcpStream,
    server: &mut TcpStream,
    control: &mut watch::Receiver<Control>,
    epoch: u64,
    counters: &Counters,
) -> End {
    let (mut client_rx, mut client_tx) = client.split();
    let (mut server_rx, mut server_tx) = server.split();
    let mut up = vec![0_u8; BUFFER];
    let mut down = vec![0_u8; BUFFER];
    // The client's last bytes (for a pattern that straddles reads), and whether this
    // connection's next bytes from upstream are to be cut.
    let mut window = Vec::new();
    let mut doomed = false;
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
                    // Marked before the bytes go on, so their reply cannot outrun the mark.
                    if !doomed {
                        window.extend_from_slice(&up[..n]);
                        doomed = counters.take_request(&window);
                        let keep = counters.keep();
                        window.drain(..window.len().saturating_sub(keep));
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
                    if doomed || counters.take_next() {
                        // The reply is dropped, never written to the client.
                        counters.replies_cut.fetch_add(1, Ordering::SeqCst);
                        tracing::debug!(bytes = n, "proxy cut a reply");
                        return End::Cut;
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

    /// Whether `conn` was reset or closed (what a client sees of a cut).
    async fn ended(conn: &mut TcpStream) -> bool {
        let mut byte = [0_u8; 1];
        let read = timeout(WAIT, conn.read(&mut byte)).await.expect("prompt");
        matches!(read, Ok(0)) || read.is_err_and(|e| e.kind() == io::ErrorKind::ConnectionReset)
    }

    #[tokio::test]
    async fn cuts_the_next_reply_once_and_nothing_else() {
        let proxy = Proxy::start(echo_server().await).await.expect("proxy");
        let mut idle = TcpStream::connect(proxy.addr()).await.expect("connect");
        let mut busy = TcpStream::connect(proxy.addr()).await.expect("connect");
        for conn in [&mut idle, &mut busy] {
            let got = timeout(WAIT, round_trip(conn, b"warm")).await;
            assert_eq!(got.expect("in time").expect("echo"), b"warm");
        }
        proxy.cut_next_reply();
        // The request reaches the server (which echoes it); the reply is dropped and the
        // connection reset.
        busy.write_all(b"lost").await.expect("the request is sent");
        assert!(
            ended(&mut busy).await,
            "the connection whose reply was cut ends"
        );
        assert_eq!(proxy.replies_cut(), 1);
        assert!(!proxy.is_armed(), "a one-shot: used");
        // The other connection, and new ones, pass.
        let got = timeout(WAIT, round_trip(&mut idle, b"still")).await;
        assert_eq!(got.expect("in time").expect("echo"), b"still");
        let mut fresh = TcpStream::connect(proxy.addr()).await.expect("connect");
        let got = timeout(WAIT, round_trip(&mut fresh, b"fresh")).await;
        assert_eq!(got.expect("in time").expect("echo"), b"fresh");
        assert_eq!(proxy.replies_cut(), 1);
        // Armed and taken back: nothing is cut.
        proxy.cut_next_reply();
        assert!(proxy.is_armed());
        proxy.disarm();
        assert!(!proxy.is_armed());
        let got = timeout(WAIT, round_trip(&mut fresh, b"again")).await;
        assert_eq!(got.expect("in time").expect("echo"), b"again");
        assert_eq!(proxy.replies_cut(), 1);
    }

    #[tokio::test]
    async fn cuts_the_reply_to_the_request_it_was_aimed_at() {
        let proxy = Proxy::start(echo_server().await).await.expect("proxy");
        let mut conn = TcpStream::connect(proxy.addr()).await.expect("connect");
        proxy.cut_reply_to(b"needle".to_vec());
        // Requests without the bytes, and their replies, pass; the bytes may span two requests.
        for part in [&b"hay"[..], b"nee"] {
            let got = timeout(WAIT, round_trip(&mut conn, part)).await;
            assert_eq!(got.expect("in time").expect("echo"), part);
        }
        assert_eq!(proxy.replies_cut(), 0);
        conn.write_all(b"dle and more")
            .await
            .expect("the request is sent");
        assert!(ended(&mut conn).await, "the reply to the needle was cut");
        assert_eq!(proxy.replies_cut(), 1);
        assert!(!proxy.is_armed(), "a one-shot: used");
        let mut fresh = TcpStream::connect(proxy.addr()).await.expect("connect");
        let got = timeout(WAIT, round_trip(&mut fresh, b"needle")).await;
        assert_eq!(got.expect("in time").expect("echo"), b"needle");
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

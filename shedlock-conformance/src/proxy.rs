//! A TCP proxy on 127.0.0.1 in front of one server, whose connections can be held, cut, or
//! made to lose one answer: the network failures one instance sees while the others keep
//! their connections.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with traffic, on existing and new connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forwards both ways.
    Open,
    /// Keeps every connection open but forwards nothing, and accepts new ones without
    /// forwarding: a partition without resets, where statements hang.
    Blackhole,
    /// Closes every connection and closes new ones at once: the peer sees its connections end.
    Reset,
    /// Forwards requests but holds every answer back until the mode changes: the server acts
    /// on what the client sends while the client hears nothing of it.
    HoldAnswers,
}

/// A proxy from a local port to one server (`host:port`). Dropping it closes every connection.
#[derive(Debug)]
pub struct CutProxy {
    addr: SocketAddr,
    mode: watch::Sender<ProxyMode>,
    lose_next: Arc<AtomicBool>,
    accept: JoinHandle<()>,
}

impl CutProxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `upstream` (`host:port`).
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(upstream: &str) -> std::io::Result<CutProxy> {
        CutProxy::bind(SocketAddr::from(([127, 0, 0, 1], 0)), upstream).await
    }

    /// Like [`start`](Self::start), on a given address (e.g. a port a client is already trying
    /// to reach).
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn bind(listen: SocketAddr, upstream: &str) -> std::io::Result<CutProxy> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let (mode, watch) = watch::channel(ProxyMode::Open);
        let lose_next = Arc::new(AtomicBool::new(false));
        let upstream = upstream.to_owned();
        let armed = Arc::clone(&lose_next);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (watch, upstream, armed) = (watch.clone(), upstream.clone(), armed.clone());
                tokio::spawn(async move {
                    let _ = serve(client, &upstream, watch, &armed).await;
                });
            }
        });
        Ok(CutProxy {
            addr,
            mode,
            lose_next,
            accept,
        })
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `url` with its `host:port` replaced by the proxy's.
    ///
    /// # Errors
    /// When the URL has no `scheme://host…` part.
    pub fn url_through(&self, url: &str) -> anyhow::Result<String> {
        url_at(url, self.addr)
    }

    /// Switches what the proxy does, for existing and new connections.
    pub fn set(&self, mode: ProxyMode) {
        self.mode.send_replace(mode);
    }

    /// Arms a one-time loss: the next connection that sends bytes forwards that request, waits
    /// for the server's first answer bytes, drops them and closes (both ways). The server has
    /// done the work (a statement in autocommit is committed) but the client never hears of
    /// it; every other connection keeps working.
    ///
    /// The loss goes to whichever connection speaks first: a pool that checks a connection
    /// before handing it out (sqlx's `test_before_acquire`) spends it on that check. Arm it
    /// when only the client under test can speak.
    pub fn lose_next_answer(&self) {
        self.lose_next.store(true, Ordering::SeqCst);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.mode.send_replace(ProxyMode::Reset);
        self.accept.abort();
    }
}

/// `url` with its `host:port` replaced by `addr`.
///
/// # Errors
/// When the URL has no `scheme://host…` part.
pub fn url_at(url: &str, addr: SocketAddr) -> anyhow::Result<String> {
    let (scheme, rest) = url.split_once("://").context("URL without scheme://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let userinfo = authority.rsplit_once('@').map_or("", |(u, _)| u);
    let at = if userinfo.is_empty() { "" } else { "@" };
    Ok(format!("{scheme}://{userinfo}{at}{addr}{path}"))
}

/// `host:port` of a server URL (the scheme's default port when it names none: 3306 for
/// `mysql`/`mariadb`, 6379 for `redis`, else 5432).
///
/// # Errors
/// When the URL has no `scheme://host…` part.
pub fn upstream_of(url: &str) -> anyhow::Result<String> {
    let (scheme, rest) = url.split_once("://").context("URL without scheme://")?;
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.contains(':') {
        return Ok(host.to_owned());
    }
    let port = if scheme.starts_with("mysql") || scheme.starts_with("mariadb") {
        3306
    } else if scheme.starts_with("redis") {
        6379
    } else {
        5432
    };
    Ok(format!("{host}:{port}"))
}

async fn serve(
    client: TcpStream,
    upstream: &str,
    mut mode: watch::Receiver<ProxyMode>,
    lose_next: &AtomicBool,
) -> anyhow::Result<()> {
    // Connections made while cut: closed (reset) or held silently (blackhole).
    loop {
        match *mode.borrow_and_update() {
            ProxyMode::Open | ProxyMode::HoldAnswers => break,
            ProxyMode::Reset => return Ok(()),
            ProxyMode::Blackhole => {}
        }
        mode.changed().await?;
    }
    let server = TcpStream::connect(upstream).await?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Set by the request side when this connection took the armed loss; read by the answer
    // side. Set before the request is forwarded, so no answer to it can arrive first.
    let losing = AtomicBool::new(false);
    let request = Side::Request {
        lose_next,
        losing: &losing,
    };
    let answer = Side::Answer { losing: &losing };
    // Returning drops all four halves: both connections close.
    tokio::select! {
        r = pump(client_read, server_write, mode.clone(), request) => r,
        r = pump(server_read, client_write, mode, answer) => r,
    }
}

/// Which way a pump copies, with what it needs for a lost answer.
#[derive(Clone, Copy)]
enum Side<'a> {
    Request {
        lose_next: &'a AtomicBool,
        losing: &'a AtomicBool,
    },
    Answer {
        losing: &'a AtomicBool,
    },
}

/// Copies one direction while the proxy is open; stops reading while blackholed (the answer
/// side also while answers are held); ends on reset, end of stream, or (answer side) the first
/// bytes of a lost answer.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut mode: watch::Receiver<ProxyMode>,
    side: Side<'_>,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let current = *mode.borrow_and_update();
        match (current, side) {
            (ProxyMode::Reset, _) => return Ok(()),
            (ProxyMode::Blackhole, _) | (ProxyMode::HoldAnswers, Side::Answer { .. }) => {
                mode.changed().await?;
                continue;
            }
            (ProxyMode::Open | ProxyMode::HoldAnswers, _) => {}
        }
        tokio::select! {
            read = from.read(&mut buf) => {
                let n = read?;
                if n == 0 {
                    return Ok(());
                }
                match side {
                    Side::Request { lose_next, losing } => {
                        if lose_next.swap(false, Ordering::SeqCst) {
                            losing.store(true, Ordering::SeqCst);
                        }
                    }
                    Side::Answer { losing } if losing.load(Ordering::SeqCst) => return Ok(()),
                    Side::Answer { .. } => {}
                }
                to.write_all(&buf[..n]).await?;
            }
            changed = mode.changed() => changed?,
        }
    }
}

//! A TCP proxy on 127.0.0.1 between one instance and the database, whose connections can be
//! cut: the network failure a single instance sees while the others keep their connections.

use std::net::SocketAddr;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forwards both ways.
    Open,
    /// Keeps every connection open but forwards nothing, and accepts new ones without
    /// forwarding: a partition without resets, where statements hang.
    Blackhole,
    /// Closes every connection and refuses new ones at once: the peer sees resets.
    Reset,
}

/// A proxy from a local port to the database.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    mode: watch::Sender<ProxyMode>,
    task: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `upstream` (`host:port`).
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn start(upstream: &str) -> anyhow::Result<TcpProxy> {
        TcpProxy::bind("127.0.0.1:0".parse()?, upstream).await
    }

    /// Like [`start`](Self::start), on a given address (e.g. a port a client is already
    /// trying to reach).
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn bind(listen: SocketAddr, upstream: &str) -> anyhow::Result<TcpProxy> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let (mode, watch) = watch::channel(ProxyMode::Open);
        let upstream = upstream.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let watch = watch.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let _ = serve(client, &upstream, watch).await;
                });
            }
        });
        Ok(TcpProxy { addr, mode, task })
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
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.mode.send_replace(ProxyMode::Reset);
        self.task.abort();
    }
}

/// `url` with its `host:port` replaced by `addr`.
///
/// # Errors
/// When the URL has no `scheme://host…` part.
pub fn url_at(url: &str, addr: SocketAddr) -> anyhow::Result<String> {
    let (scheme, rest) = url.split_once("://").context("URL without scheme://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (userinfo, _) = authority
        .rsplit_once('@')
        .map_or(("", authority), |(u, h)| (u, h));
    let at = if userinfo.is_empty() { "" } else { "@" };
    Ok(format!("{scheme}://{userinfo}{at}{addr}{path}"))
}

/// `host:port` of a database URL (default port for the scheme when missing).
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
    } else {
        5432
    };
    Ok(format!("{host}:{port}"))
}

async fn serve(
    client: TcpStream,
    upstream: &str,
    mut mode: watch::Receiver<ProxyMode>,
) -> anyhow::Result<()> {
    // Connections made while cut: refused (reset) or held silently (blackhole).
    loop {
        match *mode.borrow_and_update() {
            ProxyMode::Open => break,
            ProxyMode::Reset => return Ok(()),
            ProxyMode::Blackhole => {}
        }
        mode.changed().await?;
    }
    let server = TcpStream::connect(upstream).await?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        r = pump(client_read, server_write, mode.clone()) => r,
        r = pump(server_read, client_write, mode) => r,
    }
}

/// Copies one direction while the proxy is open; stops reading while blackholed; ends (closing
/// both directions) on reset or end of stream.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<ProxyMode>,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let current = *mode.borrow_and_update();
        match current {
            ProxyMode::Reset => return Ok(()),
            ProxyMode::Blackhole => {
                mode.changed().await?;
                continue;
            }
            ProxyMode::Open => {}
        }
        tokio::select! {
            read = from.read(&mut buf) => {
                let n = read?;
                if n == 0 {
                    return Ok(());
                }
                to.write_all(&buf[..n]).await?;
            }
            changed = mode.changed() => changed?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rewrites_urls_and_finds_upstreams() {
        let proxy = TcpProxy::start("127.0.0.1:9").await.unwrap();
        let port = proxy.addr().port();
        assert_eq!(
            proxy
                .url_through("postgres://root@127.0.0.1:5432/test")
                .unwrap(),
            format!("postgres://root@127.0.0.1:{port}/test")
        );
        assert_eq!(
            proxy.url_through("mysql://127.0.0.1/test?x=1").unwrap(),
            format!("mysql://127.0.0.1:{port}/test?x=1")
        );
        assert_eq!(
            upstream_of("postgres://root@localhost/test").unwrap(),
            "localhost:5432"
        );
        assert_eq!(
            upstream_of("mysql://root@127.0.0.1:3307/test").unwrap(),
            "127.0.0.1:3307"
        );
        assert_eq!(upstream_of("mariadb://h").unwrap(), "h:3306");
    }

    #[tokio::test]
    async fn forwards_then_blackholes_then_resets() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let proxy = TcpProxy::start(&echo_addr.to_string()).await.unwrap();
        let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut buf = [0u8; 4];
        conn.write_all(b"ping").await.unwrap();
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");

        proxy.set(ProxyMode::Blackhole);
        conn.write_all(b"lost").await.unwrap();
        let silent =
            tokio::time::timeout(std::time::Duration::from_millis(200), conn.read(&mut buf)).await;
        assert!(silent.is_err(), "blackholed connection answered");

        proxy.set(ProxyMode::Reset);
        let closed =
            tokio::time::timeout(std::time::Duration::from_secs(2), conn.read(&mut buf)).await;
        assert!(matches!(closed, Ok(Ok(0) | Err(_))), "{closed:?}");
    }
}

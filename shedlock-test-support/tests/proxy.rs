//! The cut-proxy's modes, against a local echo server and, for a lost answer, against the real
//! PostgreSQL (`SHEDLOCK_TEST_PG_URL`; skipped without it, failed without it when `CI=true`).

use std::time::Duration;

use shedlock_conformance::{CutProxy, ProxyMode, unique_table, upstream_of};
use shedlock_test_support::pg_url;
use sqlx::Connection as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// An echo server that also reports every chunk it received.
async fn echo_server() -> (String, mpsc::UnboundedReceiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (received, receiver) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let received = received.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    let _ = received.send(buf[..n].to_vec());
                    if stream.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, receiver)
}

async fn round_trip(conn: &mut TcpStream, message: &[u8; 4]) -> [u8; 4] {
    conn.write_all(message).await.unwrap();
    let mut buf = [0u8; 4];
    conn.read_exact(&mut buf).await.unwrap();
    buf
}

/// Whether the peer closed `conn` (end of stream or an error) within `within`.
async fn closed(conn: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4];
    matches!(
        tokio::time::timeout(within, conn.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn rewrites_urls_and_finds_upstreams() {
    let proxy = CutProxy::start("127.0.0.1:9").await.unwrap();
    let port = proxy.addr().port();
    assert_eq!(
        proxy
            .url_through("postgres://root:pw@127.0.0.1:5432/test")
            .unwrap(),
        format!("postgres://root:pw@127.0.0.1:{port}/test")
    );
    assert_eq!(
        proxy.url_through("mysql://127.0.0.1/test?x=1").unwrap(),
        format!("mysql://127.0.0.1:{port}/test?x=1")
    );
    assert_eq!(
        proxy.url_through("redis://127.0.0.1:6380").unwrap(),
        format!("redis://127.0.0.1:{port}")
    );
    assert!(proxy.url_through("127.0.0.1:2181").is_err());
    let upstreams = [
        ("postgres://root@localhost/test", "localhost:5432"),
        ("mysql://root@127.0.0.1:3307/test", "127.0.0.1:3307"),
        ("mariadb://h", "h:3306"),
        ("redis://h", "h:6379"),
    ];
    for (url, upstream) in upstreams {
        assert_eq!(upstream_of(url).unwrap(), upstream, "{url}");
    }
}

#[tokio::test]
async fn forwards_then_blackholes_then_resets() {
    let (upstream, _received) = echo_server().await;
    let proxy = CutProxy::start(&upstream).await.unwrap();
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(&round_trip(&mut conn, b"ping").await, b"ping");

    proxy.set(ProxyMode::Blackhole);
    conn.write_all(b"lost").await.unwrap();
    let mut buf = [0u8; 4];
    let silent = tokio::time::timeout(Duration::from_millis(200), conn.read(&mut buf)).await;
    assert!(silent.is_err(), "a blackholed connection answered");

    proxy.set(ProxyMode::Reset);
    assert!(closed(&mut conn, Duration::from_secs(5)).await);
    let mut new = TcpStream::connect(proxy.addr()).await.unwrap();
    assert!(closed(&mut new, Duration::from_secs(5)).await);

    proxy.set(ProxyMode::Open);
    let mut again = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(&round_trip(&mut again, b"back").await, b"back");
}

/// The armed connection's request reaches the server, its answer never reaches the client, and
/// the connection closes; the other connection and later ones are untouched.
#[tokio::test]
async fn loses_one_answer_of_one_connection() {
    let (upstream, mut received) = echo_server().await;
    let proxy = CutProxy::start(&upstream).await.unwrap();
    let mut victim = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut bystander = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(&round_trip(&mut victim, b"warm").await, b"warm");
    assert_eq!(received.recv().await.unwrap(), b"warm");

    proxy.lose_next_answer();
    victim.write_all(b"work").await.unwrap();
    assert_eq!(received.recv().await.unwrap(), b"work", "forwarded");
    let mut buf = [0u8; 4];
    let answer = tokio::time::timeout(Duration::from_secs(5), victim.read(&mut buf))
        .await
        .expect("the connection closes");
    assert!(matches!(answer, Ok(0) | Err(_)), "{answer:?}: {buf:?}");

    assert_eq!(&round_trip(&mut bystander, b"next").await, b"next");
    let mut later = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(&round_trip(&mut later, b"more").await, b"more");
}

/// The lead's case: an `INSERT` in autocommit is committed on PostgreSQL, but the client sees
/// an I/O error instead of its answer.
#[tokio::test]
async fn a_lost_answer_leaves_a_committed_insert_the_client_saw_fail() {
    let Some(url) = pg_url() else {
        return;
    };
    let table = unique_table("lost_answer");
    let mut direct = sqlx::PgConnection::connect(&url).await.unwrap();
    let create = format!("CREATE TABLE {table} (id INT PRIMARY KEY)");
    sqlx::raw_sql(sqlx::AssertSqlSafe(create))
        .execute(&mut direct)
        .await
        .unwrap();

    let proxy = CutProxy::start(&upstream_of(&url).unwrap()).await.unwrap();
    let through = proxy.url_through(&url).unwrap();
    let mut client = sqlx::PgConnection::connect(&through).await.unwrap();
    let mut bystander = sqlx::PgConnection::connect(&through).await.unwrap();
    let insert = format!("INSERT INTO {table} (id) VALUES ($1)");
    let insert = || sqlx::query(sqlx::AssertSqlSafe(insert.clone()));
    // Once first, so that the statement is prepared and the armed request is the insert itself.
    insert().bind(1).execute(&mut client).await.unwrap();

    proxy.lose_next_answer();
    let lost = insert().bind(2).execute(&mut client).await;
    assert!(matches!(lost, Err(sqlx::Error::Io(_))), "{lost:?}");

    let count = format!("SELECT count(*) FROM {table} WHERE id = 2");
    let count = || sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(count.clone()));
    assert_eq!(
        count().fetch_one(&mut direct).await.unwrap(),
        1,
        "committed"
    );
    assert_eq!(count().fetch_one(&mut bystander).await.unwrap(), 1);

    let drop = format!("DROP TABLE {table}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
        .execute(&mut direct)
        .await
        .unwrap();
}

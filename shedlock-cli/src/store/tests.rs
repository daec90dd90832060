//! Reading URLs: which store, what is shown of the URL, the credentials of multi-host URLs.

use super::*;
use crate::cli::DbKind;

/// The failure `url` is refused with.
fn refused(url: &str) -> Failure {
    match read(url) {
        Ok(store) => panic!("{url} read as {}", store.name()),
        Err(failure) => failure,
    }
}

#[test]
fn only_the_masked_url_is_shown_or_debugged() {
    for (url, shown) in [
        (
            "postgres://app:s%40cret@db.example:5432/prod",
            "postgres://app:***@db.example:5432/prod",
        ),
        (
            "postgres://app@db/prod?password=s%40cret+2",
            "postgres://app@db/prod?password=***",
        ),
        ("sqlite:locks.db", "sqlite:locks.db"),
        (
            "redis://:s%40cret@h1:6380,redis://u:s%40cret@h2:6381/1",
            "redis://:***@h1:6380,redis://u:***@h2:6381/1",
        ),
        (
            "redis+sentinel://:s%40cret@h1:26379,h2:26379/shedlock/1",
            "redis+sentinel://:***@h1:26379,h2:26379/shedlock/1",
        ),
        (
            "zookeeper://app:s%40cret@h1:2181,h2:2181/chroot",
            "zookeeper://app:***@h1:2181,h2:2181/chroot",
        ),
    ] {
        let store = read(url).unwrap();
        assert_eq!(store.target().shown, shown);
        let debug = format!("{:?}", store.target());
        assert!(debug.contains(shown) && !debug.contains("cret"), "{debug}");
    }
    let zk = read("zk://app:s%40cret@h1:2181,h2:2181/x").unwrap();
    let address = zookeeper::address(zk.target()).unwrap();
    assert_eq!(address.connect_string, "h1:2181,h2:2181/x");
    assert_eq!(
        address.credentials,
        Some(("app".to_owned(), "s@cret".to_owned()))
    );
}

/// Issue 29 item 6: the credentials of a multi-host URL are read where the masking hides
/// them (userinfo up to the last `@` before the first `/`), whatever they hold; a URL with
/// an `@` after its hosts is refused without quoting it.
#[test]
fn multi_host_credentials_are_read_where_they_are_masked() {
    for (written, password) in [
        ("s3cr%2Fet", "s3cr/et"),
        ("p@ss:w,rd", "p@ss:w,rd"),
        ("a%40%3A%2C%25%3F%23b", "a@:,%?#b"),
    ] {
        let etcd = format!("etcd://root:{written}@h1:2379,h2:22379");
        let store = read(&etcd).unwrap();
        assert_eq!(store.target().shown, "etcd://root:***@h1:2379,h2:22379");
        let address = etcd::address(store.target()).unwrap();
        assert_eq!(address.connect_string, "http://h1:2379,http://h2:22379");
        let expected = Some(("root".to_owned(), password.to_owned()));
        assert_eq!(address.credentials, expected, "{etcd}");
        for scheme in ["zookeeper", "zk"] {
            let zk = format!("{scheme}://app:{written}@h1:2181,h2:2181/chroot");
            let store = read(&zk).unwrap();
            assert_eq!(
                store.target().shown,
                format!("{scheme}://app:***@h1:2181,h2:2181/chroot")
            );
            let address = zookeeper::address(store.target()).unwrap();
            assert_eq!(address.connect_string, "h1:2181,h2:2181/chroot");
            let expected = Some(("app".to_owned(), password.to_owned()));
            assert_eq!(address.credentials, expected, "{zk}");
        }
    }
    for url in [
        "etcd://root:s3cr/et@h1:2379,h2:22379",
        "zookeeper://app:s3cr/et@h1:2181/chroot",
        "zk://app:s3cr?et@h1:2181",
        "postgres://app:s3cr#et@h/db",
        "redis://:s3cr/et@h:6379",
        "redis://h:1,redis://:s3cr/et@h:6379",
        "mysql://root:s3cr/et@h/db",
        "postgres:app:s3cr/et@h/db",
    ] {
        let refused = refused(url);
        assert_eq!(refused.exit, Exit::Usage, "{url}");
        assert!(!refused.message.contains("s3cr"), "{}", refused.message);
        assert!(refused.message.contains("%2F"), "{}", refused.message);
    }
}

#[test]
fn the_scheme_decides_the_database() {
    let store = |url: &str| read(url).unwrap();
    assert_eq!(store("mysql://root@h/db").database(), Some(DbKind::Mysql));
    assert_eq!(store("sqlite:locks.db").database(), Some(DbKind::Sqlite));
    assert_eq!(store("redis://:pw@h:6379/2").name(), "Redis");
    assert_eq!(
        store("redis://a:1,rediss://b:2,redis://c:3").name(),
        "RedLock"
    );
    assert_eq!(
        store("redis+sentinel://:pw@h1:26379,h2:26379/shedlock").name(),
        "Redis"
    );
    assert_eq!(store("redis+cluster://:pw@h1:7000,h2:7001").name(), "Redis");
    let sentinel_in_redlock = refused("redis://a:1,redis+sentinel://h1:26379/m");
    assert_eq!(sentinel_in_redlock.exit, Exit::Usage);
    assert_eq!(store("zookeeper://h1:2181,h2:2181/app").name(), "ZooKeeper");
    assert_eq!(store("etcd://h1:2379,h2:2379").name(), "etcd");
    let mixed = refused("redis://a:1,postgres://u:topsecret@h/db");
    assert_eq!(mixed.exit, Exit::Usage);
    assert!(!mixed.message.contains("topsecret"), "{}", mixed.message);
    let unknown = refused("oracle://u:topsecret@h/db");
    assert_eq!(unknown.exit, Exit::Usage);
    assert!(
        !unknown.message.contains("topsecret"),
        "{}",
        unknown.message
    );
    assert!(
        unknown.message.ends_with(
            "expected postgres://…, mysql://…, sqlite:FILE, redis://… (one server), \
             redis+sentinel://host:port,…/master (Sentinel), redis+cluster://host:port,… \
             (Redis Cluster), redis://…,redis://…,… (RedLock masters), zookeeper://host:port,… \
             or \
             etcd://host:port,…"
        ),
        "{}",
        unknown.message
    );
}

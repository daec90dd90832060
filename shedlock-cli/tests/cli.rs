//! The `shedlock` binary against real databases: PostgreSQL (`SHEDLOCK_TEST_PG_URL`),
//! MySQL/MariaDB (`SHEDLOCK_TEST_MYSQL_URL`) and SQLite (a temporary file). The server tests
//! are skipped without their URL, and fail without it when `CI=true`.
//!
//! Every case is written once in `cases` and runs on each database listed in `case_tests!`;
//! locks are taken and checked with the provider's own API.

use std::path::PathBuf;
mod common;

use std::time::Duration;

use common::{Run, assert_held_and_free_listed, assert_release_refused, find, shedlock_command};
use shedlock_conformance::unique_table;
use shedlock_core::{LockConfiguration, LockInspector, LockProvider, LockRecord};
use shedlock_sqlx::SqlLockProvider;
use shedlock_sqlx::dialect::{Dialect, MySql, Pg, Sqlite};
use shedlock_test_support::{mysql_url, pg_url};

#[derive(Debug, Clone, Copy)]
enum Kind {
    Postgres,
    Mysql,
    Sqlite,
}

/// One database and a lock table of this test's own.
#[derive(Debug)]
struct Db {
    kind: Kind,
    url: String,
    table: String,
    file: Option<PathBuf>,
}

/// Runs `$function::<Dialect>(args…)` for the database's dialect.
macro_rules! on_dialect {
    ($db:expr, $function:ident($($arg:expr),*)) => {
        match $db.kind {
            Kind::Postgres => $function::<Pg>($($arg),*).await,
            Kind::Mysql => $function::<MySql>($($arg),*).await,
            Kind::Sqlite => $function::<Sqlite>($($arg),*).await,
        }
    };
}

impl Db {
    fn postgres(base: &str) -> Option<Db> {
        let url = pg_url()?;
        Some(Db::on_server(Kind::Postgres, url, base))
    }

    fn mysql(base: &str) -> Option<Db> {
        let url = mysql_url()?;
        Some(Db::on_server(Kind::Mysql, url, base))
    }

    fn sqlite(base: &str) -> Option<Db> {
        let table = unique_table(base);
        let file = std::env::temp_dir().join(format!("{table}.db"));
        Some(Db {
            kind: Kind::Sqlite,
            url: format!("sqlite:{}", file.display()),
            table,
            file: Some(file),
        })
    }

    fn on_server(kind: Kind, url: String, base: &str) -> Db {
        Db {
            kind,
            url,
            table: unique_table(base),
            file: None,
        }
    }

    /// Runs `shedlock --url … --table … ARGS`.
    fn shedlock(&self, args: &[&str]) -> Run {
        self.shedlock_on(&self.url, &self.table, args)
    }

    /// Runs `shedlock --url URL --table TABLE ARGS`.
    fn shedlock_on(&self, url: &str, table: &str, args: &[&str]) -> Run {
        Run::of(
            shedlock_command()
                .args(["--url", url, "--table", table, "--connect-timeout", "20s"])
                .args(args),
        )
    }

    /// The database's URL with a password the server does not know, if it takes one.
    fn url_with_password(&self, password: &str) -> Option<String> {
        if self.file.is_some() {
            return None;
        }
        let mut url = url::Url::parse(&self.url).expect("a server URL");
        url.set_password(Some(password)).expect("a URL with a host");
        Some(url.to_string())
    }

    /// A database user (named like the table) who may only read the table: the statements
    /// that create it, its URL, and the statements that remove it. None on SQLite.
    fn read_only_user(&self) -> Option<(Vec<String>, String, Vec<String>)> {
        let (user, table) = (&self.table, &self.table);
        let (setup, cleanup) = match self.kind {
            Kind::Sqlite => return None,
            Kind::Postgres => (
                vec![
                    format!("CREATE ROLE {user} LOGIN"),
                    format!("GRANT SELECT ON {table}, {table}_runs TO {user}"),
                ],
                vec![
                    format!("DROP TABLE {table}, {table}_runs"),
                    format!("DROP ROLE {user}"),
                ],
            ),
            Kind::Mysql => (
                vec![
                    format!("CREATE USER '{user}'@'%'"),
                    format!("GRANT SELECT ON {table} TO '{user}'@'%'"),
                    format!("GRANT SELECT ON {table}_runs TO '{user}'@'%'"),
                ],
                vec![
                    format!("DROP TABLE {table}, {table}_runs"),
                    format!("DROP USER '{user}'@'%'"),
                ],
            ),
        };
        let mut url = url::Url::parse(&self.url).expect("a server URL");
        url.set_username(user).expect("a URL with a host");
        url.set_password(None).expect("a URL with a host");
        Some((setup, url.to_string(), cleanup))
    }

    /// A URL of the same kind that nothing answers.
    fn unreachable_url(&self) -> String {
        match self.kind {
            Kind::Postgres => "postgres://root@127.0.0.1:1/test".to_owned(),
            Kind::Mysql => "mysql://root@127.0.0.1:1/test".to_owned(),
            Kind::Sqlite => "sqlite:/nonexistent-shedlock-dir/locks.db".to_owned(),
        }
    }

    /// Takes `name` as `holder` for ten minutes: the new fencing token.
    async fn acquire(&self, name: &str, holder: &str) -> u64 {
        on_dialect!(self, acquire_as(&self.url, &self.table, name, holder))
    }

    async fn lock_state(&self, name: &str) -> Option<LockRecord> {
        on_dialect!(self, lock_state_of(&self.url, &self.table, name))
    }

    async fn remove(self) {
        match &self.file {
            Some(file) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
                }
            }
            None => {
                let sql = format!("DROP TABLE IF EXISTS {0}, {0}_runs, {0}_board", self.table);
                execute(&self.url, &sql).await;
            }
        }
    }
}

async fn provider<D: Dialect>(url: &str, table: &str, holder: &str) -> SqlLockProvider<D> {
    let connected = SqlLockProvider::<D>::connect(url).await.expect("connect");
    SqlLockProvider::<D>::builder(connected.pool().clone())
        .table(table)
        .holder(holder)
        .build()
        .expect("a valid provider")
}

async fn acquire_as<D: Dialect>(url: &str, table: &str, name: &str, holder: &str) -> u64 {
    let provider = provider::<D>(url, table, holder).await;
    let config = LockConfiguration::new(name, Duration::from_secs(600), Duration::ZERO)
        .expect("a valid configuration");
    let lease = provider.acquire(&config).await.expect("acquire");
    lease.expect("the lock is free").fencing_token()
}

async fn record_runs<D: Dialect>(url: &str, table: &str, lock: &str) {
    let provider = provider::<D>(url, table, "web-1").await;
    common::record_two_runs(&provider, lock).await;
}

async fn paged_runs<D: Dialect>(db: &Db) {
    let provider = provider::<D>(&db.url, &db.table, "web-1").await;
    let log = provider.run_log().expect("SQL keeps run records");
    common::assert_runs_paged(|args| db.shedlock(args), log).await;
}

async fn steer_jobs<D: Dialect>(db: &Db) {
    let provider = provider::<D>(&db.url, &db.table, "web-1").await;
    let fleet = shedlock_core::Fleet::of_provider(std::sync::Arc::new(provider))
        .expect("SQL keeps a board");
    common::publish_two_instances(&fleet).await;
    common::assert_jobs_steered(|args| db.shedlock(args), &fleet).await;
}

async fn lock_state_of<D: Dialect>(url: &str, table: &str, name: &str) -> Option<LockRecord> {
    let provider = provider::<D>(url, table, "reader").await;
    provider.lock_record(name).await.expect("read the lock")
}

/// Runs one statement of the test's own on a database.
async fn execute(url: &str, sql: &str) {
    use sqlx::{AssertSqlSafe, Connection, Executor};
    let done = if url.starts_with("postgres") {
        let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
        c.execute(AssertSqlSafe(sql.to_owned())).await.map(drop)
    } else if url.starts_with("sqlite") {
        let mut c = sqlx::SqliteConnection::connect(url).await.expect("connect");
        c.execute(AssertSqlSafe(sql.to_owned())).await.map(drop)
    } else {
        let mut c = sqlx::MySqlConnection::connect(url).await.expect("connect");
        c.execute(AssertSqlSafe(sql.to_owned())).await.map(drop)
    };
    done.unwrap_or_else(|e| panic!("{sql}: {e}"));
}

mod cases {
    use super::*;

    /// `runs list` and `runs show` on the run table beside the lock table.
    pub(super) async fn runs_list_and_show(db: Db) {
        db.shedlock(&["schema", "--apply"]).expect(0);
        on_dialect!(db, record_runs(&db.url, &db.table, "nightly"));
        common::assert_runs_listed(|args| db.shedlock(args), "nightly");
        db.remove().await;
    }

    /// Issue 29 item 3: `runs list` pages with `--limit` and `--before`.
    pub(super) async fn runs_are_paged(db: Db) {
        db.shedlock(&["schema", "--apply"]).expect(0);
        on_dialect!(db, paged_runs(&db));
        db.remove().await;
    }

    /// Issue 32: `jobs list|show|pause|resume|run` on what instances publish to the board
    /// table `schema --apply` made beside the lock table.
    pub(super) async fn jobs_are_steered(db: Db) {
        db.shedlock(&["schema", "--apply"]).expect(0);
        on_dialect!(db, steer_jobs(&db));
        db.remove().await;
    }

    /// `locks list` pages with `--limit` and `--after`, and filters with `--prefix`.
    pub(super) async fn locks_are_paged(db: Db) {
        db.shedlock(&["schema", "--apply"]).expect(0);
        for name in ["page-a", "page-b", "page-c", "other"] {
            db.acquire(name, "web-1").await;
        }
        common::assert_locks_paged(|args| db.shedlock(args));
        db.remove().await;
    }

    pub(super) async fn list_and_show(db: Db) {
        db.shedlock(&["schema", "--apply"]).expect(0);
        let token = db.acquire("held-lock", "web-1").await;
        db.acquire("free-lock", "web-2").await;
        db.shedlock(&["locks", "release", "free-lock", "--holder", "web-2"])
            .expect(0);

        assert_held_and_free_listed(|args| db.shedlock(args), token);
        db.remove().await;
    }

    pub(super) async fn release_checks_holder_and_token(db: Db) {
        db.shedlock(&["schema", "--apply"]).expect(0);
        let token = db.acquire("job", "web-1").await;
        let right_token = token.to_string();
        let held = async || db.lock_state("job").await.unwrap().held;
        assert_release_refused(|args| db.shedlock(args), token, held).await;

        let run = db.shedlock(&[
            "locks",
            "release",
            "job",
            "--holder",
            "web-1",
            "--token",
            &right_token,
        ]);
        run.expect(0);
        let row = db.lock_state("job").await.expect("the row stays");
        assert!(!row.held);
        // Releasing a free lock changes nothing and is not an error.
        db.shedlock(&["locks", "release", "job", "--holder", "web-1"])
            .expect(0);
        db.shedlock(&["locks", "release", "no-such-lock", "--force"])
            .expect(3);
        db.remove().await;
    }

    pub(super) async fn force_expires_and_tokens_keep_growing(db: Db) {
        db.shedlock(&["schema", "--apply"]).expect(0);
        let first = db.acquire("job", "web-1").await;
        let run = db
            .shedlock(&["locks", "release", "job", "--force"])
            .expect(0);
        assert!(run.stdout().contains("web-1"), "{}", run.stdout());
        let row = db.lock_state("job").await.expect("the row stays");
        assert!(!row.held);
        assert_eq!(row.fencing_token, first);
        let next = db.acquire("job", "web-2").await;
        assert!(next > first, "token {next} after {first}");
        db.remove().await;
    }

    pub(super) async fn schema_print_apply_and_doctor(db: Db) {
        let missing = db.shedlock(&["doctor"]);
        if db.file.is_none() {
            missing.expect(5);
        } else {
            // SQLite: the file does not exist yet, and doctor does not create it.
            missing.expect(1);
        }
        let ddl = db.shedlock(&["schema"]).expect(0).stdout();
        assert!(
            ddl.contains(&format!("CREATE TABLE IF NOT EXISTS {}", db.table)),
            "{ddl}"
        );
        assert!(ddl.contains("fencing_token"), "{ddl}");
        let applied = db.shedlock(&["schema", "--apply"]).expect(0).stdout();
        assert!(applied.contains(&db.url), "{applied}");
        db.shedlock(&["schema", "--apply"]).expect(0);
        let doctor = db.shedlock(&["doctor"]).expect(0).stdout();
        assert!(!doctor.contains("problem"), "{doctor}");
        assert!(doctor.contains("may read, insert and update"), "{doctor}");
        assert!(
            doctor.contains("does not matter for correctness"),
            "{doctor}"
        );
        db.remove().await;
    }

    pub(super) async fn doctor_names_what_is_missing(db: Db) {
        // A table without the holder column (its holder is called `owner`).
        db.shedlock(&["--locked-by-column", "owner", "schema", "--apply"])
            .expect(0);
        let run = db.shedlock(&["doctor"]).expect(5);
        let out = run.stdout();
        assert!(
            out.contains("problem  column `locked_by` is missing"),
            "{out}"
        );
        assert!(out.contains("CREATE TABLE IF NOT EXISTS"), "{out}");
        db.shedlock(&["--locked-by-column", "owner", "doctor"])
            .expect(0);

        // The table exists but not under this name.
        let other = format!("{}_absent", db.table);
        let absent = db.shedlock_on(&db.url, &other, &["doctor"]).expect(5);
        let expected = format!("problem  table `{other}` does not exist");
        assert!(absent.stdout().contains(&expected), "{}", absent.stdout());
        assert!(
            absent.stdout().contains("shedlock schema --apply"),
            "{}",
            absent.stdout()
        );
        db.remove().await;
    }

    /// A table whose last tick column has another name: `--last-tick-column` names it, and
    /// without it `doctor` prints the `ALTER TABLE` that adds `last_tick`, which works.
    pub(super) async fn doctor_prints_the_last_tick_alter_table(db: Db) {
        db.shedlock(&["--last-tick-column", "tick_ms", "schema", "--apply"])
            .expect(0);
        db.shedlock(&["--last-tick-column", "tick_ms", "doctor"])
            .expect(0);
        let out = db.shedlock(&["doctor"]).expect(5).stdout();
        assert!(
            out.contains("problem  column `last_tick` is missing"),
            "{out}"
        );
        let integer = match db.kind {
            Kind::Sqlite => "INTEGER",
            Kind::Postgres | Kind::Mysql => "BIGINT",
        };
        let alter = format!("ALTER TABLE {} ADD COLUMN last_tick {integer}", db.table);
        assert!(out.contains(&format!("fix      {alter},")), "{out}");
        execute(&db.url, &alter).await;
        db.shedlock(&["doctor"]).expect(0);
        db.remove().await;
    }

    /// A table made with Java ShedLock's own DDL (its README's), with a row Java wrote: one
    /// `schema --apply` makes it usable, says so only then, and `doctor` agrees.
    pub(super) async fn java_table_is_ready_after_apply(db: Db) {
        let (ddl, row) = match db.kind {
            Kind::Postgres => (
                "CREATE TABLE {t}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, \
                 locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))",
                "INSERT INTO {t} VALUES ('nightly', timezone('utc', CURRENT_TIMESTAMP) \
                 + interval '1 hour', timezone('utc', CURRENT_TIMESTAMP), 'java-host')",
            ),
            Kind::Mysql => (
                "CREATE TABLE {t}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
                 locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
                 locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))",
                "INSERT INTO {t} VALUES ('nightly', UTC_TIMESTAMP(3) + INTERVAL 1 HOUR, \
                 UTC_TIMESTAMP(3), 'java-host')",
            ),
            Kind::Sqlite => return, // Java ShedLock has no SQLite DDL
        };
        execute(&db.url, &ddl.replace("{t}", &db.table)).await;
        execute(&db.url, &row.replace("{t}", &db.table)).await;
        db.shedlock(&["doctor"]).expect(5);
        let applied = db.shedlock(&["schema", "--apply"]).expect(0).stdout();
        assert!(applied.contains("is ready"), "{applied}");
        let doctor = db.shedlock(&["doctor"]).expect(0).stdout();
        assert!(!doctor.contains("problem"), "{doctor}");
        let locks = db.shedlock(&["locks", "list", "--json"]).expect(0).json();
        let nightly = find(&locks, "nightly");
        assert_eq!(nightly["locked_by"], "java-host", "{locks}");
        assert_eq!(nightly["held"], true, "{locks}");
        db.remove().await;
    }

    /// `schema --apply` cannot fix every table (here PostgreSQL times rounded to the second):
    /// it says the table is not usable, and exits as `doctor` does.
    pub(super) async fn apply_does_not_call_an_unusable_table_ready(db: Db) {
        let Kind::Postgres = db.kind else { return };
        execute(
            &db.url,
            &format!(
                "CREATE TABLE {} (name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(0) NOT NULL, \
                 locked_at TIMESTAMP(0) NOT NULL, locked_by VARCHAR(255) NOT NULL)",
                db.table
            ),
        )
        .await;
        let applied = db.shedlock(&["schema", "--apply"]).expect(5).stdout();
        assert!(!applied.contains("is ready"), "{applied}");
        assert!(applied.contains("timestamp(0)"), "{applied}");
        let doctor = db.shedlock(&["doctor"]).expect(5).stdout();
        assert!(
            doctor.contains("ALTER COLUMN lock_until TYPE TIMESTAMP"),
            "{doctor}"
        );
        db.remove().await;
    }

    pub(super) async fn doctor_reports_missing_privileges(db: Db) {
        let Some((setup, url, cleanup)) = db.read_only_user() else {
            return;
        };
        db.shedlock(&["schema", "--apply"]).expect(0);
        for sql in &setup {
            execute(&db.url, sql).await;
        }
        let run = db.shedlock_on(&url, &db.table, &["doctor"]);
        for sql in &cleanup {
            execute(&db.url, sql).await;
        }
        let out = run.expect(5).stdout();
        assert!(out.contains("has the columns, types and key"), "{out}");
        assert!(out.contains("problem  "), "{out}");
        let grant = format!(
            "GRANT SELECT, INSERT, UPDATE ON {} TO {}",
            db.table, db.table
        );
        assert!(out.contains(&grant), "{out}");
    }

    pub(super) async fn a_password_is_never_printed(db: Db) {
        const PASSWORD: &str = "Hunter2-Do-Not-Print";
        let Some(url) = db.url_with_password(PASSWORD) else {
            return;
        };
        for args in [&["doctor"][..], &["locks", "list"], &["locks", "show", "x"]] {
            let run = db.shedlock_on(&url, &db.table, args);
            let all = format!("{}{}", run.stdout(), run.stderr());
            assert!(!all.contains(PASSWORD), "{all}");
            if args == ["doctor"] {
                // Reached (a server that does not check passwords) or not: the URL is shown
                // with the password hidden.
                assert!(all.contains(":***@"), "{all}");
            }
        }
        db.remove().await;
    }

    pub(super) async fn unreachable_database_is_an_error(db: Db) {
        let run = db
            .shedlock_on(&db.unreachable_url(), &db.table, &["locks", "list"])
            .expect(1);
        assert!(
            run.stderr().contains("cannot reach the database at"),
            "{}",
            run.stderr()
        );
    }
}

/// `--help` lists the exit codes and never shows the value of `DATABASE_URL`, which the
/// commands read when there is no `--url`.
#[test]
fn help_and_database_url_from_the_environment() {
    let shedlock = || {
        let mut command = shedlock_command();
        command.env("DATABASE_URL", "postgres://app:Hunter2-Env@db.invalid/prod");
        command
    };
    let help = shedlock().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    assert!(help.contains("4  refused"), "{help}");
    assert!(!help.contains("Hunter2-Env"), "{help}");

    let file = std::env::temp_dir().join(format!("{}.db", unique_table("cli_env")));
    let url = format!("sqlite:{}", file.display());
    let run = |args: &[&str]| {
        Run(shedlock()
            .env("DATABASE_URL", &url)
            .args(args)
            .output()
            .unwrap())
    };
    run(&["schema", "--apply"]).expect(0);
    let list = run(&["locks", "list", "--json"]).expect(0).json();
    assert_eq!(list, serde_json::json!([]));
    let _ = std::fs::remove_file(&file);
    let none = Run(shedlock()
        .env_remove("DATABASE_URL")
        .args(["locks", "list"])
        .output()
        .unwrap());
    assert!(
        none.expect(2)
            .stderr()
            .contains("set SHEDLOCK_URL (or DATABASE_URL), or give --url")
    );
}

// The cases, on each database: one `#[tokio::test]` each, on a table (or file) of its own.
case_tests!(|_test| {
    postgres: Db::postgres("cli"),
    mysql: Db::mysql("cli"),
    sqlite: Db::sqlite("cli"),
} {
    list_and_show_held_and_free_locks: list_and_show,
    release_is_refused_unless_holder_and_token_match: release_checks_holder_and_token,
    force_expires_the_lease_and_keeps_the_row: force_expires_and_tokens_keep_growing,
    schema_prints_and_applies_and_doctor_agrees: schema_print_apply_and_doctor,
    doctor_names_a_missing_column_and_table: doctor_names_what_is_missing,
    doctor_prints_the_alter_table_for_last_tick: doctor_prints_the_last_tick_alter_table,
    doctor_reports_missing_privileges: doctor_reports_missing_privileges,
    java_shedlock_table_is_ready_after_apply: java_table_is_ready_after_apply,
    apply_does_not_call_an_unusable_table_ready: apply_does_not_call_an_unusable_table_ready,
    a_wrong_password_is_never_echoed: a_password_is_never_printed,
    an_unreachable_database_exits_1: unreachable_database_is_an_error,
    runs_are_listed_and_shown: runs_list_and_show,
    runs_are_listed_a_page_at_a_time: runs_are_paged,
    locks_are_listed_a_page_at_a_time: locks_are_paged,
    jobs_are_listed_paused_resumed_and_run: jobs_are_steered,
});

/// Issue 29 item 7: a run-record read that fails is reported as a read ("cannot read the run
/// records of …"), not as "failed to record the runs".
#[tokio::test]
async fn a_failed_run_read_is_reported_as_a_read() {
    use sqlx::{Connection, SqliteConnection};
    let table = unique_table("cli_runs_unreadable");
    let file = std::env::temp_dir().join(format!("{table}.db"));
    let url = format!("sqlite:{}", file.display());
    let shedlock = |args: &[&str]| {
        Run::of(
            shedlock_command()
                .args(["--url", &url, "--table", &table])
                .args(args),
        )
    };
    shedlock(&["schema", "--apply"]).expect(0);
    // A run table another program replaced with one the provider cannot read.
    let mut connection = SqliteConnection::connect(&url).await.expect("connect");
    for sql in [
        format!("DROP TABLE {table}_runs"),
        format!("CREATE TABLE {table}_runs (x INTEGER)"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut connection)
            .await
            .expect("replace the run table");
    }
    connection.close().await.expect("close");
    for (args, whose) in [
        (&["runs", "list"][..], "of every lock"),
        (&["runs", "list", "--lock", "nightly"], "of lock `nightly`"),
        (&["runs", "show", "nightly"], "of lock `nightly`"),
    ] {
        let stderr = shedlock(args).expect(1).stderr();
        assert!(
            stderr.contains(&format!("cannot read the run records {whose}")),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("record the runs"), "{args:?}: {stderr}");
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

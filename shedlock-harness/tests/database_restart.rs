//! PostgreSQL and MariaDB stopped and started in the middle of a run of three workers.
//!
//! The servers are shared with every other test binary. Cargo runs test binaries one after
//! another, so while this binary runs nothing else uses them; inside it, one test restarts
//! PostgreSQL and then MariaDB, and a guard starts a stopped server again even when the test
//! fails. Needs root and the servers' control commands (as on the CI machine); skipped with a
//! line otherwise, failed when `CI=true`.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use shedlock_harness::{Backend, Event, WriteOutcome, now_us};

use common::{PATIENCE, Scenario, assert_passed};

/// How one server is stopped, started and probed.
struct Server {
    backend: Backend,
    stop: Vec<String>,
    start: Vec<String>,
    /// Succeeds while the server accepts connections.
    ready: Vec<String>,
    /// Succeeds while the server process exists (MariaDB keeps running a while after its
    /// shutdown command returns, and a start meanwhile is a no-op).
    running: Option<Vec<String>>,
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

impl Server {
    fn of(backend: Backend) -> Server {
        match backend {
            Backend::Postgres => {
                let version = std::fs::read_dir("/etc/postgresql")
                    .ok()
                    .and_then(|mut dir| dir.next())
                    .and_then(|entry| entry.ok())
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .unwrap_or_else(|| "15".to_owned());
                let ctl = format!("pg_ctlcluster --skip-systemctl-redirect {version} main");
                Server {
                    backend,
                    stop: words(&format!("{ctl} stop")),
                    start: words(&format!("{ctl} start")),
                    ready: words("pg_isready -h 127.0.0.1 -p 5432 -q"),
                    running: None,
                }
            }
            _ => Server {
                backend,
                stop: words("mysqladmin -h 127.0.0.1 -P 3306 -u root shutdown"),
                start: words(
                    "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd",
                ),
                ready: words("mysqladmin -h 127.0.0.1 -P 3306 -u root ping"),
                running: Some(words(
                    "start-stop-daemon --status --exec /usr/sbin/mariadbd",
                )),
            },
        }
    }

    fn succeeds(command: &[String]) -> bool {
        Command::new(&command[0])
            .args(&command[1..])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Whether this machine lets the test stop and start the server: root, the control
    /// commands, and the server's files.
    fn controllable(&self) -> bool {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
        let found = |program: &str| {
            Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let installed = match self.backend {
            Backend::Postgres => Path::new("/etc/postgresql").is_dir(),
            _ => Path::new("/usr/sbin/mariadbd").exists(),
        };
        root && installed
            && [&self.stop, &self.start, &self.ready]
                .iter()
                .all(|c| found(&c[0]))
    }

    fn wait_until(&self, what: &str, bound: Duration, condition: impl Fn() -> bool) {
        let started = Instant::now();
        while !condition() {
            assert!(
                started.elapsed() < bound,
                "{}: {what} within {bound:?}",
                self.backend
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the server; the guard starts it again when dropped, if the test did not.
    fn stop(&self) -> Stopped<'_> {
        assert!(
            Self::succeeds(&self.stop),
            "{}: {:?} failed",
            self.backend,
            self.stop
        );
        let stopped = Stopped {
            server: self,
            up: false,
        };
        if let Some(running) = &self.running {
            self.wait_until("the server process exits", PATIENCE, || {
                !Self::succeeds(running)
            });
        }
        stopped
    }
}

/// A stopped server; started again on drop (also while a failed test unwinds).
struct Stopped<'a> {
    server: &'a Server,
    up: bool,
}

impl Stopped<'_> {
    fn start(mut self) {
        self.start_now();
    }

    fn start_now(&mut self) {
        if self.up {
            return;
        }
        let s = self.server;
        assert!(
            Server::succeeds(&s.start),
            "{}: {:?} failed",
            s.backend,
            s.start
        );
        s.wait_until(
            "the server accepts connections",
            Duration::from_secs(60),
            || Server::succeeds(&s.ready),
        );
        self.up = true;
    }
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        if !self.up {
            eprintln!(
                "{}: starting the server again after a failure",
                self.server.backend
            );
            self.start_now();
        }
    }
}

async fn restart_mid_run(backend: Backend) {
    let server = Server::of(backend);
    if !server.controllable() {
        shedlock_conformance::env::skip(format_args!(
            "cannot stop and start the {backend} server here (needs root and {:?})",
            server.stop
        ));
        return;
    }
    let locks = ["restart-a", "restart-b"];
    let Some(mut s) = Scenario::start(backend, 3, &locks, |o| {
        o.lease = Duration::from_millis(2_500)
    })
    .await
    else {
        return;
    };
    for lock in locks {
        s.committed_after(lock, 1, PATIENCE).await;
    }

    let down_from = s.fleet.events().len();
    let down_at = now_us();
    let stopped = tokio::task::block_in_place(|| server.stop());
    // Every worker keeps ticking against the dead server: store errors, no panic.
    for worker in 0..3 {
        s.wait(down_from, PATIENCE, "a store error on every worker", |r| {
            (r.worker == worker && matches!(r.event, Event::AcquireFailed { .. })).then_some(())
        })
        .await;
    }
    tokio::task::block_in_place(|| stopped.start());
    let up_at = now_us();
    let outage_ms = (up_at - down_at) / 1000;

    // The first tick after the server is back runs, once.
    let first_tick_back = up_at / s.tick_us + 1;
    for lock in locks {
        s.wait(
            down_from,
            PATIENCE,
            &format!("{lock} to run again"),
            |r| match &r.event {
                Event::Write {
                    lock: l,
                    tick,
                    outcome: WriteOutcome::Accepted,
                    ..
                } if l == lock && *tick >= first_tick_back => Some(()),
                _ => None,
            },
        )
        .await;
    }
    s.fleet.collect_for(Duration::from_secs(2)).await;
    // Ticks that fired while the server was down (or restarting) may be lost.
    s.outages
        .push(down_at - s.tick_us..first_tick_back * s.tick_us);
    let logged = (0..3).all(|w| {
        s.fleet
            .stderr_of(w)
            .iter()
            .any(|line| line.contains("WARN") && line.contains("lock store failed"))
    });
    let report = s.finish().await;
    println!("{backend}: server down for {outage_ms} ms");
    assert_passed(&report);
    assert!(report.counts.errors >= 3, "{report}");
    assert!(
        logged,
        "every worker logs a warning for a tick lost to the outage"
    );
}

#[test]
fn database_restarted_mid_run() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for backend in [Backend::Postgres, Backend::MySql] {
        runtime.block_on(restart_mid_run(backend));
    }
}

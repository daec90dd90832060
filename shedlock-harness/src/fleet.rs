//! The supervisor's side: spawn worker processes, collect their event lines, wait for a line
//! (never a bare sleep where a line can be awaited), send signals, stop them all.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::event::{Event, now_us};
use crate::worker::WorkerOptions;

/// One event line as the supervisor received it.
#[derive(Debug, Clone)]
pub struct Received {
    /// Which worker (index in spawn order).
    pub worker: usize,
    /// When the supervisor read it (µs since the epoch).
    pub received_at: i64,
    /// The event.
    pub event: Event,
}

/// A signal the harness sends to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGKILL: the process dies at once, holding whatever it held.
    Kill,
    /// SIGSTOP: the process freezes (a long GC pause, a stopped VM).
    Stop,
    /// SIGCONT: a stopped process resumes.
    Cont,
}

#[derive(Debug)]
struct Worker {
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    killed: bool,
}

enum Line {
    Stdout(String),
    Stderr(String),
    Closed,
}

/// A set of worker processes and everything they reported.
#[derive(Debug)]
pub struct Fleet {
    exe: PathBuf,
    workers: Vec<Worker>,
    lines_tx: mpsc::UnboundedSender<(usize, Line)>,
    lines: mpsc::UnboundedReceiver<(usize, Line)>,
    open_streams: usize,
    events: Vec<Received>,
    stderr: Vec<Vec<String>>,
    unparsed: Vec<(usize, String)>,
}

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Line::Stdout(l) => write!(f, "stdout {l}"),
            Line::Stderr(l) => write!(f, "stderr {l}"),
            Line::Closed => f.write_str("closed"),
        }
    }
}

impl Fleet {
    /// A fleet of processes of the harness binary at `exe`.
    pub fn new(exe: impl Into<PathBuf>) -> Self {
        let (lines_tx, lines) = mpsc::unbounded_channel();
        Fleet {
            exe: exe.into(),
            workers: Vec::new(),
            lines_tx,
            lines,
            open_streams: 0,
            events: Vec::new(),
            stderr: Vec::new(),
            unparsed: Vec::new(),
        }
    }

    /// Starts a worker; returns its index.
    ///
    /// # Errors
    /// When the process cannot be spawned.
    pub fn spawn(&mut self, options: &WorkerOptions) -> anyhow::Result<usize> {
        let mut args = vec!["worker".to_owned()];
        args.extend(options.to_args());
        self.spawn_args(args)
    }

    /// Starts the harness binary with `args` (a command and its options), a process that
    /// prints event lines like a worker; returns its index.
    ///
    /// # Errors
    /// When the process cannot be spawned.
    pub fn spawn_args(&mut self, args: Vec<String>) -> anyhow::Result<usize> {
        let index = self.workers.len();
        let mut child = Command::new(&self.exe)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("HARNESS_WORKER_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawn {}", self.exe.display()))?;
        let pid = child.id().context("worker has a pid")?;
        let stdout = child.stdout.take().context("piped stdout")?;
        let stderr = child.stderr.take().context("piped stderr")?;
        self.forward(index, stdout, Line::Stdout);
        self.forward(index, stderr, Line::Stderr);
        self.open_streams += 2;
        self.stderr.push(Vec::new());
        self.workers.push(Worker {
            stdin: child.stdin.take(),
            child,
            pid,
            killed: false,
        });
        Ok(index)
    }

    /// Sends each line `worker` writes to `stream` to the fleet's channel (as `line`), then
    /// that the stream closed.
    fn forward(
        &self,
        worker: usize,
        stream: impl AsyncRead + Unpin + Send + 'static,
        line: fn(String) -> Line,
    ) {
        let tx = self.lines_tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(text)) = lines.next_line().await {
                let _ = tx.send((worker, line(text)));
            }
            let _ = tx.send((worker, Line::Closed));
        });
    }

    /// How many workers were spawned.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Whether none was spawned.
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// A worker's process id.
    pub fn pid(&self, worker: usize) -> u32 {
        self.workers[worker].pid
    }

    /// Workers the harness killed.
    pub fn killed(&self) -> Vec<usize> {
        (0..self.workers.len())
            .filter(|&w| self.workers[w].killed)
            .collect()
    }

    /// Every event received so far, in order of arrival.
    pub fn events(&self) -> &[Received] {
        &self.events
    }

    /// What a worker wrote to stderr (its log) so far.
    pub fn stderr_of(&self, worker: usize) -> &[String] {
        &self.stderr[worker]
    }

    /// Stdout lines that were not events.
    pub fn unparsed(&self) -> &[(usize, String)] {
        &self.unparsed
    }

    fn accept(&mut self, worker: usize, line: Line) {
        match line {
            Line::Stdout(text) => match text.parse::<Event>() {
                Ok(event) => self.events.push(Received {
                    worker,
                    received_at: now_us(),
                    event,
                }),
                Err(_) => self.unparsed.push((worker, text)),
            },
            Line::Stderr(text) => self.stderr[worker].push(text),
            Line::Closed => self.open_streams -= 1,
        }
    }

    /// Receives lines until `deadline`; false if every stream closed first.
    async fn receive_until(&mut self, deadline: Instant) -> bool {
        match tokio::time::timeout_at(deadline, self.lines.recv()).await {
            Ok(Some((worker, line))) => {
                self.accept(worker, line);
                true
            }
            Ok(None) => false,
            Err(_) => false,
        }
    }

    /// Collects lines for `duration`.
    pub async fn collect_for(&mut self, duration: Duration) {
        let deadline = Instant::now() + duration;
        while Instant::now() < deadline {
            self.receive_until(deadline).await;
        }
    }

    /// Waits until an event from index `since` on (see [`Fleet::events`]) satisfies `matches`,
    /// and returns what it returned.
    ///
    /// # Errors
    /// After `timeout`, naming `what` was awaited and showing the workers' last log lines.
    pub async fn wait_for<T>(
        &mut self,
        since: usize,
        timeout: Duration,
        what: &str,
        mut matches: impl FnMut(&Received) -> Option<T>,
    ) -> anyhow::Result<T> {
        let deadline = Instant::now() + timeout;
        let mut next = since;
        loop {
            while next < self.events.len() {
                if let Some(found) = matches(&self.events[next]) {
                    return Ok(found);
                }
                next += 1;
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out after {timeout:?} waiting for {what}\n{}",
                    self.tail()
                );
            }
            self.receive_until(deadline).await;
        }
    }

    /// Waits for the `ready` line of each of `workers`.
    ///
    /// # Errors
    /// After `timeout`, or when a worker reports a fatal error.
    pub async fn wait_ready(&mut self, workers: &[usize], timeout: Duration) -> anyhow::Result<()> {
        for &w in workers {
            let ready = self
                .wait_for(
                    0,
                    timeout,
                    &format!("worker {w} to be ready"),
                    |r| match &r.event {
                        Event::Ready { .. } if r.worker == w => Some(Ok(())),
                        Event::Fatal { error } if r.worker == w => Some(Err(error.clone())),
                        _ => None,
                    },
                )
                .await?;
            if let Err(error) = ready {
                bail!("worker {w} failed: {error}");
            }
        }
        Ok(())
    }

    /// Sends `signal` to a worker.
    ///
    /// # Errors
    /// When `kill` fails.
    pub fn signal(&mut self, worker: usize, signal: Signal) -> anyhow::Result<()> {
        let name = match signal {
            Signal::Kill => "KILL",
            Signal::Stop => "STOP",
            Signal::Cont => "CONT",
        };
        let pid = self.workers[worker].pid.to_string();
        let status = std::process::Command::new("kill")
            .args(["-s", name, &pid])
            .status()?;
        anyhow::ensure!(status.success(), "kill -s {name} {pid} failed: {status}");
        if signal == Signal::Kill {
            self.workers[worker].killed = true;
        }
        Ok(())
    }

    /// Asks every worker to stop (closes its stdin), waits up to `timeout` for all to exit and
    /// for their last lines, then kills any that did not.
    ///
    /// # Errors
    /// When a worker did not exit in time or exited unsuccessfully (unless the harness killed it).
    pub async fn stop_all(&mut self, timeout: Duration) -> anyhow::Result<()> {
        for worker in &mut self.workers {
            worker.stdin = None;
            if !worker.killed {
                // A worker stopped by the harness would otherwise never see its stdin close.
                let _ = std::process::Command::new("kill")
                    .args(["-s", "CONT", &worker.pid.to_string()])
                    .status();
            }
        }
        let deadline = Instant::now() + timeout;
        let mut problems = Vec::new();
        for w in 0..self.workers.len() {
            let exited = loop {
                if let Some(status) = self.workers[w].child.try_wait()? {
                    break Some(status);
                }
                if Instant::now() >= deadline {
                    break None;
                }
                // Keep reading while waiting, or a worker blocked on a full pipe never exits.
                let step = (Instant::now() + Duration::from_millis(50)).min(deadline);
                self.receive_until(step).await;
            };
            match exited {
                Some(status) if status.success() || self.workers[w].killed => {}
                Some(status) => problems.push(format!("worker {w} exited with {status}")),
                None => {
                    let _ = self.workers[w].child.kill().await;
                    problems.push(format!("worker {w} did not stop within {timeout:?}"));
                }
            }
        }
        let drain_until = Instant::now() + Duration::from_secs(5);
        while self.open_streams > 0 && self.receive_until(drain_until).await {}
        if problems.is_empty() {
            Ok(())
        } else {
            bail!("{}\n{}", problems.join("; "), self.tail())
        }
    }

    /// The last log lines of every worker, for error messages.
    pub fn tail(&self) -> String {
        let mut out = String::new();
        for (w, lines) in self.stderr.iter().enumerate() {
            for line in lines.iter().rev().take(5).rev() {
                out.push_str(&format!("  worker {w} log: {line}\n"));
            }
        }
        for (w, line) in self.unparsed.iter().rev().take(5) {
            out.push_str(&format!("  worker {w} said: {line}\n"));
        }
        out
    }
}

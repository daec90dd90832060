//! Leader election through RedLock over three independent Redis masters (seed 004's design):
//! one instance leads and does the leader's job, its lease kept alive with no re-acquire
//! loop; it is killed (`SIGKILL`) and another instance takes over once the lease ran out.
//!
//! Run with: `cargo run --example redis_leader`
//! (masters from the arguments, or `SHEDLOCK_TEST_REDLOCK_URLS`, comma-separated, or
//! `redis://127.0.0.1:6380`, `:6381`, `:6382`; `bash .ci/redis.sh start` starts those three).
//!
//! Three candidates run as three OS processes. The last line is a summary; the process exits
//! non-zero if two instances ever did the leader's job under overlapping terms, or nobody took
//! over.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock::{ElectionConfig, LeaderElection, LeaderState, LockProvider, redis::RedLockProvider};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

const CANDIDATES: usize = 3;
const CANDIDATE_VAR: &str = "SHEDLOCK_REDIS_LEADER_CANDIDATE";
const URLS_VAR: &str = "SHEDLOCK_TEST_REDLOCK_URLS";
const DEFAULT_URLS: &str = "redis://127.0.0.1:6380,redis://127.0.0.1:6381,redis://127.0.0.1:6382";
/// Short, for the demo: a killed leader is replaced about 3 s later.
const ELECTION: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_secs(3),
    renew_deadline: Duration::from_secs(2),
    retry_period: Duration::from_millis(500),
};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let urls = std::env::args()
        .nth(1)
        .or_else(|| std::env::var(URLS_VAR).ok())
        .unwrap_or_else(|| DEFAULT_URLS.to_owned());
    match std::env::var(CANDIDATE_VAR) {
        Ok(candidate) => run_candidate(candidate.parse()?, &urls).await,
        Err(_) => supervise(&urls).await,
    }
}

fn unix_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// One candidate: while it leads, it does the leader's job every 250 ms and says so on
/// stdout (`work <candidate> <term> <unix ms>`), for the supervisor to check.
async fn run_candidate(candidate: usize, urls: &str) -> anyhow::Result<()> {
    let provider = RedLockProvider::builder()
        .holder(format!("candidate-{candidate}"))
        .timeout(Duration::from_millis(100))
        .connect(urls.split(','))
        .await?;
    println!("ready {candidate} {}", provider.holder());
    let election = LeaderElection::builder("redis_leader_demo", provider)
        .config(ELECTION)
        .on_elected(move |term| println!("elected {candidate} {term} {}", unix_millis()))
        .on_revoked(move || println!("revoked {candidate} {}", unix_millis()))
        .start()?;
    loop {
        // Decide at the moment the work starts: the candidacy's standing is deadline-checked.
        if let LeaderState::Leader { term } = election.state() {
            println!("work {candidate} {term} {}", unix_millis());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Starts the candidates, kills the first leader after it worked for a while, waits for the
/// next, and checks the leader's job never ran under two terms at once.
async fn supervise(urls: &str) -> anyhow::Result<()> {
    println!("masters: {urls}");
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut children: Vec<Child> = Vec::new();
    for candidate in 0..CANDIDATES {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .arg(urls)
            .env(CANDIDATE_VAR, candidate.to_string())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut out = BufReader::new(child.stdout.take().expect("piped")).lines();
        let lines_tx = lines_tx.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out.next_line().await {
                let _ = lines_tx.send(line);
            }
        });
        children.push(child);
    }
    let started = tokio::time::Instant::now();
    let mut first: Option<(usize, u128)> = None; // leader and when it was killed
    let mut next: Option<(usize, u128)> = None; // the leader after it, and when elected
    let mut work: BTreeMap<u64, (usize, u128, u128)> = BTreeMap::new(); // term → who, first, last
    while started.elapsed() < Duration::from_secs(40) {
        let Ok(Some(line)) = tokio::time::timeout(Duration::from_secs(1), lines.recv()).await
        else {
            continue;
        };
        println!("{line}");
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["work", who, term, at] => {
                let (who, term, at): (usize, u64, u128) =
                    (who.parse()?, term.parse()?, at.parse()?);
                let entry = work.entry(term).or_insert((who, at, at));
                entry.2 = at;
                if first.is_none() && at - entry.1 >= 3_000 {
                    children[who].kill().await?;
                    println!("killed candidate {who} (SIGKILL) after 3 s of leader work");
                    first = Some((who, unix_millis()));
                }
            }
            ["elected", who, _, at] if first.is_some() && next.is_none() => {
                next = Some((who.parse()?, at.parse()?));
            }
            _ => {}
        }
        if let Some((_, elected_at)) = next
            && unix_millis() > elected_at + 2_000
        {
            break;
        }
    }
    for child in &mut children {
        let _ = child.kill().await;
    }
    // Terms are fencing tokens: each term's work must end before a later term's starts.
    let spans: Vec<_> = work.values().collect();
    let overlaps = spans.windows(2).filter(|w| w[0].2 >= w[1].1).count();
    let (Some((killed, killed_at)), Some((successor, elected_at))) = (first, next) else {
        anyhow::bail!("summary: no takeover seen (terms: {work:?})");
    };
    println!(
        "summary: leader={killed} killed, successor={successor} elected after {} ms, terms={} overlaps={overlaps}",
        elected_at.saturating_sub(killed_at),
        work.len()
    );
    anyhow::ensure!(overlaps == 0, "two terms did leader work at once");
    Ok(())
}

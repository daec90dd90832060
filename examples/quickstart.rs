//! Three instances of a service, as three OS processes, share one SQLite file and run a locked
//! job every second: each tick runs on exactly one of them.
//!
//! Run with: `cargo run --example quickstart`
//!
//! No set-up: the database is a file in the temp directory. The last line is a summary;
//! the process exits non-zero if any tick ran twice or two runs overlapped.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock::{
    Job, JobLock, JobRegistry, LockContext, LockEvent, Schedule, Scheduler, SchedulerConfig,
    sql::SqliteLockProvider,
};
use tokio::io::{AsyncBufReadExt, BufReader};

const INSTANCES: usize = 3;
const RUN_FOR: Duration = Duration::from_secs(15);
const INSTANCE_VAR: &str = "SHEDLOCK_QUICKSTART_INSTANCE";
const DATABASE_VAR: &str = "SHEDLOCK_QUICKSTART_DATABASE";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match std::env::var(INSTANCE_VAR) {
        Ok(instance) => run_instance(instance.parse()?, &std::env::var(DATABASE_VAR)?).await,
        Err(_) => supervise().await,
    }
}

/// Opens the shared database (WAL journal and a busy timeout, so processes can share it).
async fn provider(database: &str, holder: &str) -> anyhow::Result<SqliteLockProvider> {
    let provider = SqliteLockProvider::connect(&format!("sqlite://{database}")).await?;
    Ok(provider.with_holder(holder)?)
}

fn unix_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// One instance: a scheduler with one locked job; reports what it did on stdout, one line
/// per event, for the supervisor to tally.
async fn run_instance(instance: usize, database: &str) -> anyhow::Result<()> {
    let provider = provider(database, &format!("instance-{instance}")).await?;
    let job = Job::new(
        "tick",
        Schedule::cron("* * * * * *")?,
        move |()| async move {
            let lock = LockContext::current()?;
            let start = unix_millis();
            tokio::time::sleep(Duration::from_millis(200)).await; // the "work"
            println!(
                "exec {instance} {} {} {start} {}",
                start / 1000,
                lock.fencing_token(),
                unix_millis()
            );
            Ok::<_, shedlock::Error>(())
        },
    )
    .with_lock(
        JobLock::new("quickstart_tick")?
            .lock_at_most_for(Duration::from_secs(10))?
            // Keeps the lock past the fast job's end, so an instance whose trigger fires a few
            // milliseconds later does not run the same tick again.
            .lock_at_least_for(Duration::from_millis(500))?,
    );
    let scheduler = Scheduler::builder()
        .provider(provider)
        .config(SchedulerConfig::default())
        .listener(move |event: &LockEvent<'_>| {
            if let LockEvent::Skipped { .. } = event {
                println!("skip {instance} {}", unix_millis() / 1000);
            }
        })
        .registry(JobRegistry::new(()).add(job))
        .start()
        .await?;
    tokio::time::sleep(RUN_FOR).await;
    scheduler.shutdown().await;
    Ok(())
}

#[derive(Default)]
struct Tick {
    ran: Vec<(usize, u64)>,
    skipped: Vec<usize>,
}

/// Starts the instances, prints one line per tick, then the summary.
async fn supervise() -> anyhow::Result<()> {
    let database =
        std::env::temp_dir().join(format!("shedlock-quickstart-{}.db", std::process::id()));
    let database = database.to_string_lossy().into_owned();
    provider(&database, "supervisor")
        .await?
        .create_schema()
        .await?;
    println!(
        "starting {INSTANCES} instances on {database} for {} s",
        RUN_FOR.as_secs()
    );

    let (lines, mut reports) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut children = Vec::new();
    for instance in 1..=INSTANCES {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .env(INSTANCE_VAR, instance.to_string())
            .env(DATABASE_VAR, &database)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut stdout = BufReader::new(child.stdout.take().expect("piped")).lines();
        let lines = lines.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                let _ = lines.send(line);
            }
        });
        children.push(child);
    }
    drop(lines);

    let mut ticks: BTreeMap<u64, Tick> = BTreeMap::new();
    let mut runs: Vec<(u128, u128)> = Vec::new();
    let mut printed = 0;
    while let Some(line) = reports.recv().await {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["exec", instance, second, token, start, end] => {
                let tick = ticks.entry(second.parse()?).or_default();
                tick.ran.push((instance.parse()?, token.parse()?));
                runs.push((start.parse()?, end.parse()?));
            }
            ["skip", instance, second] => ticks
                .entry(second.parse()?)
                .or_default()
                .skipped
                .push(instance.parse()?),
            _ => println!("{line}"),
        }
        // A tick is complete once every instance reported it.
        while let Some((&second, tick)) = ticks.iter().nth(printed) {
            if tick.ran.len() + tick.skipped.len() < INSTANCES {
                break;
            }
            print_tick(second, tick);
            printed += 1;
        }
    }
    for child in &mut children {
        let status = child.wait().await?;
        anyhow::ensure!(status.success(), "an instance failed: {status}");
    }
    for (&second, tick) in ticks.iter().skip(printed) {
        print_tick(second, tick);
    }

    let executions: usize = ticks.values().map(|t| t.ran.len()).sum();
    let duplicates: usize = ticks.values().map(|t| t.ran.len().saturating_sub(1)).sum();
    runs.sort();
    let overlaps = runs.windows(2).filter(|w| w[1].0 < w[0].1).count();
    let _ = std::fs::remove_file(&database);
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{database}{suffix}"));
    }
    println!(
        "summary: ticks={} executions={executions} duplicates={duplicates} overlaps={overlaps} instances={INSTANCES}",
        ticks.len()
    );
    if duplicates > 0 || overlaps > 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn print_tick(second: u64, tick: &Tick) {
    let clock = format!(
        "{:02}:{:02}:{:02}",
        second / 3600 % 24,
        second / 60 % 60,
        second % 60
    );
    let ran = match tick.ran.as_slice() {
        [] => "nobody ran it".to_owned(),
        [(instance, token)] => format!("instance {instance} ran it (fencing token {token})"),
        many => format!("DUPLICATE: instances {many:?} all ran it"),
    };
    let mut skipped = tick.skipped.clone();
    skipped.sort();
    println!("tick {clock} UTC  {ran}; skipped: {skipped:?}");
}

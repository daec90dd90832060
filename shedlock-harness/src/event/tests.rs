//! The line protocol round-trips every event and rejects garbage.

use super::*;

#[test]
fn every_event_round_trips() {
    let events = [
        Event::Ready {
            holder: "w1:42".into(),
            pid: 42,
        },
        Event::ConnectFailed {
            attempt: 2,
            error: "refused (os error 111)\nmore".into(),
        },
        Event::Attempt {
            lock: "l".into(),
            tick: 7,
            at: 1,
        },
        Event::Acquired {
            lock: "l".into(),
            token: 3,
            at: 10,
            since: 9,
            until: 20,
        },
        Event::Skipped {
            lock: "l".into(),
            at: 5,
        },
        Event::AcquireFailed {
            lock: "l".into(),
            at: 5,
            error: "pool timed out: x=y".into(),
        },
        Event::Start {
            lock: "l".into(),
            token: 3,
            at: 11,
        },
        Event::Lost {
            lock: "l".into(),
            token: 3,
            at: 12,
        },
        Event::Write {
            lock: "l".into(),
            token: 3,
            tick: 7,
            start: 11,
            end: 13,
            lost: true,
            outcome: WriteOutcome::Rejected,
        },
        Event::Write {
            lock: "l".into(),
            token: 4,
            tick: 8,
            start: 11,
            end: 13,
            lost: false,
            outcome: WriteOutcome::Failed("connection reset".into()),
        },
        Event::Released {
            lock: "l".into(),
            token: 3,
            at: 14,
        },
        Event::Stopped {
            lock: "l".into(),
            token: 4,
            at: 15,
        },
        Event::Leader { term: 9, at: 1 },
        Event::Follower { at: 2 },
        Event::LeaderWork { term: 9, at: 3 },
        Event::Missed {
            lock: "l".into(),
            count: 4,
            at: 5,
        },
        Event::Overlapped {
            lock: "l".into(),
            count: 1,
            at: 6,
        },
        Event::Summary(Counters {
            attempts: 5,
            acquired: 2,
            skipped: 3,
            ..Counters::default()
        }),
        Event::Fatal {
            error: "cannot connect".into(),
        },
    ];
    for event in events {
        let line = event.to_string();
        let mut expected = event.clone();
        if let Event::ConnectFailed { error, .. } = &mut expected {
            *error = one_line(error);
        }
        assert_eq!(line.parse::<Event>(), Ok(expected), "{line}");
    }
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    for line in [
        "",
        "nonsense",
        "start lock=x",
        "write lock=x token=a",
        "ready holder",
    ] {
        assert!(line.parse::<Event>().is_err(), "{line}");
    }
}

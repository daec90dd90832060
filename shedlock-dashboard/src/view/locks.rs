//! The locks table (filtered, paged) and the elections.

use maud::{Markup, html};

use super::{duration, encode, history_link, time};
use crate::DashboardOptions;
use crate::read::{PageQuery, Snapshot};

pub(super) fn locks(snapshot: &Snapshot, options: &DashboardOptions, query: &PageQuery) -> Markup {
    html! {
        section #locks {
            h2 { "Locks" }
            form method="get" {
                input type="hidden" name="view" value="locks";
                label { "Name starts with " input #prefix type="search" name="prefix" value=(query.prefix); }
                " " button type="submit" { "Filter" }
                @if !query.prefix.is_empty() || !query.after.is_empty() {
                    " " a href="?view=locks" { "All locks" }
                }
            }
            @if snapshot.locks.is_empty() {
                p.meta { "No locks." }
            } @else {
                table {
                    thead { tr {
                        th { "Name" } th { "State" } th { "Holder" } th { "Remaining" }
                        th { "Until" } th { "Token" }
                        @if snapshot.runs.is_some() { th { "Last run" } }
                        @if options.release_allowed() { th {} }
                    } }
                    tbody {
                        @for lock in &snapshot.locks {
                            tr.lock data-name=(lock.name) {
                                td.name { (lock.name) }
                                td { @if lock.held { span.state.held { "held" } } @else { span.state.free { "free" } } }
                                td.holder { (lock.holder) }
                                @if lock.held {
                                    td.remaining data-remaining-ms=(lock.remaining().as_millis()) { (duration(lock.remaining())) }
                                } @else {
                                    td.remaining { "–" }
                                }
                                td { (time(lock.lock_until)) }
                                td.token { (lock.fencing_token) }
                                @if let Some(runs) = &snapshot.runs {
                                    td.last-run {
                                        @match runs.get(&lock.name).and_then(|runs| runs.runs.first()) {
                                            Some(run) => {
                                                @let outcome = snapshot.outcome(run);
                                                a.(outcome.as_str()) href=(history_link(&lock.name, None)) title=(time(run.started_at)) {
                                                    (outcome.as_str())
                                                }
                                            }
                                            None => { "–" }
                                        }
                                    }
                                }
                                @if options.release_allowed() {
                                    td { @if lock.held {
                                        form.inline method="post" {
                                            input type="hidden" name="name" value=(lock.name);
                                            input type="hidden" name="holder" value=(lock.holder);
                                            input type="hidden" name="token" value=(lock.fencing_token);
                                            button.release type="submit" { "Release…" }
                                        }
                                    } }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(last) = &snapshot.next_page {
                nav { a #next-page href=(next_page(&query.prefix, last)) { "Next " (options.page_size) " →" } }
            }
        }
    }
}

/// The next page's query string, its values percent-encoded.
fn next_page(prefix: &str, after: &str) -> String {
    format!(
        "?view=locks&prefix={}&after={}",
        encode(prefix),
        encode(after)
    )
}

pub(super) fn elections(snapshot: &Snapshot) -> Markup {
    html! {
        @if !snapshot.elections.is_empty() {
            section #elections {
                h2 { "Elections" }
                table {
                    thead { tr { th { "Election" } th { "Leader" } th { "Term" } th { "Lease until" } } }
                    tbody {
                        @for (name, lock) in &snapshot.elections {
                            tr.election data-name=(name) {
                                td.name { (name) }
                                @match lock.as_ref().filter(|lock| lock.held) {
                                    Some(lock) => {
                                        td.holder { (lock.holder) }
                                        td { (lock.fencing_token) }
                                        td { (time(lock.lock_until)) }
                                    }
                                    None => { td.meta colspan="3" { "no leader" } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn page_links_encode_their_values() {
        assert_eq!(
            super::next_page("a b", "x&y=<z>"),
            "?view=locks&prefix=a%20b&after=x%26y%3D%3Cz%3E"
        );
    }
}

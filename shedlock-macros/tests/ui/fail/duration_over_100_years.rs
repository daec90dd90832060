use shedlock::{scheduled, scheduler_lock};

// 100 years (`MAX_DURATION`) is the longest duration: one nanosecond more is refused, in either
// form.
#[scheduled(fixed_rate = "100y 1ns")]
#[scheduler_lock(name = "archive", lock_at_most_for = "P36526D")]
async fn archive() {}

fn main() {}

#![deny(warnings)]
// `crate = "..."` names the facade when it is reached under another path.
use std::sync::atomic::{AtomicBool, Ordering};

extern crate shedlock as renamed;

#[renamed::scheduled(fixed_rate = "1m", crate = "renamed")]
#[renamed::scheduler_lock(name = "renamed")]
async fn through_rename() {}

static SHIM_USED: AtomicBool = AtomicBool::new(false);

/// A facade re-export that also records that the generated code went through it.
mod platform {
    pub mod shedlock {
        pub mod __private {
            pub use ::shedlock::__private::{
                IntoJobResult, Job, JobFactory, assert_send, job_lock, lock_context,
            };

            pub fn fixed_delay(
                delay: ::core::time::Duration,
                initial_delay: ::core::time::Duration,
            ) -> ::shedlock::Schedule {
                crate::SHIM_USED.store(true, ::core::sync::atomic::Ordering::SeqCst);
                ::shedlock::__private::fixed_delay(delay, initial_delay)
            }
        }
    }
}

#[renamed::scheduler_lock(name = "through_shim", crate = "crate::platform::shedlock")]
#[renamed::scheduled(fixed_delay = "1m")]
async fn through_shim(lock: renamed::LockContext) {
    let _ = lock;
}

fn main() {
    let job: renamed::Job<()> = renamed::job!(through_rename);
    assert_eq!(job.name(), "through_rename");
    let job: renamed::Job<u8> = renamed::job!(through_shim);
    assert_eq!(job.lock().map(|lock| lock.name()), Some("through_shim"));
    assert!(SHIM_USED.load(Ordering::SeqCst));
}

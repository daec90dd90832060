//! The jobs an application registers at startup, with the state they share.

use std::fmt;

use crate::Job;

/// The jobs of an application and the state handed to them (cloned for every run).
///
/// ```
/// use std::time::Duration;
/// use shedlock_runtime::{Job, JobRegistry, Schedule};
///
/// #[derive(Clone)]
/// struct AppState { greeting: &'static str }
///
/// let hello = Job::new("hello", Schedule::fixed_rate(Duration::from_secs(5))?, |state: AppState| async move {
///     println!("{}", state.greeting);
/// });
/// let registry = JobRegistry::new(AppState { greeting: "hi" }).add(hello);
/// assert_eq!(registry.jobs().len(), 1);
/// # Ok::<(), shedlock_core::Error>(())
/// ```
///
/// With the macros, annotated functions are added by name: `registry.add(shedlock::job!(my_job))`.
pub struct JobRegistry<S> {
    pub(crate) state: S,
    pub(crate) jobs: Vec<Job<S>>,
}

impl<S> JobRegistry<S> {
    /// An empty registry over `state`.
    pub fn new(state: S) -> Self {
        JobRegistry {
            state,
            jobs: Vec::new(),
        }
    }

    /// Adds a job.
    #[allow(clippy::should_implement_trait)] // a builder step, not arithmetic
    pub fn add(mut self, job: Job<S>) -> Self {
        self.jobs.push(job);
        self
    }

    /// The registered jobs, in registration order.
    pub fn jobs(&self) -> &[Job<S>] {
        &self.jobs
    }

    /// The shared state.
    pub fn state(&self) -> &S {
        &self.state
    }
}

impl<S> fmt::Debug for JobRegistry<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobRegistry")
            .field("jobs", &self.jobs)
            .finish_non_exhaustive()
    }
}

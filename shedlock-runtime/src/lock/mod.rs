//! Running work under a lock: the executor (keep-alive, lost-lock signal), the task's context,
//! the lock handle, and lock events.

pub(crate) mod context;
pub(crate) mod executor;
pub(crate) mod handle;
pub(crate) mod listener;

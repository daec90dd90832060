//! The fleet's jobs in the store: what instances publish of the jobs they carry, and the
//! switches operators set (pause, resume, run now), on a small keyed [`Board`] every store
//! implements.

pub(crate) mod board;
pub(crate) mod jobs;

//! The recording calls with the feature `metrics` off: empty, so they compile to nothing.

use crate::{JobOutcome, LockEvent};

#[inline(always)]
pub(crate) fn lock_event(_event: &LockEvent<'_>) {}

#[derive(Debug, Default)]
pub(crate) struct JobMetrics;

impl JobMetrics {
    #[inline(always)]
    pub(crate) fn running(&self, _job: &str, _running: bool) {}
    #[inline(always)]
    pub(crate) fn missed(&self, _job: &str, _ticks: u32) {}
    #[inline(always)]
    pub(crate) fn outcome(&self, _job: &str, _outcome: &JobOutcome) {}
}

#[derive(Debug)]
pub(crate) struct ElectionMetrics;

impl ElectionMetrics {
    #[inline(always)]
    pub(crate) fn new(_election: &str) -> Self {
        ElectionMetrics
    }
    #[inline(always)]
    pub(crate) fn elected(&self) {}
    #[inline(always)]
    pub(crate) fn stepped_down(&self) {}
}

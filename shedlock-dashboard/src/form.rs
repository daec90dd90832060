//! What the page sends back: the release form and the job forms (pause, resume, run now), read
//! by the route and shown again by the view.

/// Any form the page posts, before it is told apart: a job form names an `action`, a release
/// form does not.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Posted {
    #[serde(default)]
    pub(crate) action: Option<JobAction>,
    #[serde(default)]
    pub(crate) job: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) holder: Option<String>,
    #[serde(default)]
    pub(crate) token: Option<u64>,
    #[serde(default)]
    pub(crate) release_token: Option<String>,
}

/// What a posted form asks for.
#[derive(Debug)]
pub(crate) enum PostedForm {
    Release(ReleaseForm),
    Job(JobForm),
}

impl Posted {
    /// The form it is; `None` when a field it needs is missing.
    pub(crate) fn into_form(self) -> Option<PostedForm> {
        let release_token = self.release_token;
        match self.action {
            Some(action) => Some(PostedForm::Job(JobForm {
                action,
                job: self.job?,
                release_token,
            })),
            None => Some(PostedForm::Release(ReleaseForm {
                name: self.name?,
                holder: self.holder?,
                token: self.token?,
                release_token,
            })),
        }
    }
}

/// A release form: the first step (no token) asks for confirmation and the token; the second
/// releases the lease named by holder and token, only if it is still that lease.
#[derive(Debug)]
pub(crate) struct ReleaseForm {
    pub(crate) name: String,
    pub(crate) holder: String,
    pub(crate) token: u64,
    pub(crate) release_token: Option<String>,
}

/// A job form: the first step (no token) asks for confirmation and the token; the second
/// switches the job across the fleet.
#[derive(Debug)]
pub(crate) struct JobForm {
    pub(crate) action: JobAction,
    pub(crate) job: String,
    pub(crate) release_token: Option<String>,
}

/// What an operator switches on a job from the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum JobAction {
    Pause,
    Resume,
    RunNow,
}

impl JobAction {
    /// As the form sends it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobAction::Pause => "pause",
            JobAction::Resume => "resume",
            JobAction::RunNow => "run_now",
        }
    }

    /// As a button says it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            JobAction::Pause => "Pause",
            JobAction::Resume => "Resume",
            JobAction::RunNow => "Run now",
        }
    }
}

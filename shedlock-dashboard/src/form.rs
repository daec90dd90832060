//! What the page sends back: the release form, read by the route and shown again by the view.

/// A release form: the first step (no token) asks for confirmation and the token; the second
/// releases the lease named by holder and token, only if it is still that lease.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ReleaseForm {
    pub(crate) name: String,
    pub(crate) holder: String,
    pub(crate) token: u64,
    #[serde(default)]
    pub(crate) release_token: Option<String>,
}

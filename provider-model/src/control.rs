//! What the fakes' control logs record: the harness drives the fakes in process, so a request
//! over HTTP to a `/_control` route came from someone else.

/// One request that reached a `/_control` route over HTTP, refused or not. The harness drives
/// the fakes through their handles in process, so in a case every such request came from
/// someone else: the judged party reaching for the ground truth.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ControlAttempt {
    pub method: String,
    /// The path as sent (printable ASCII, at most 200 characters).
    pub path: String,
    /// Whether it carried the control token.
    pub authorized: bool,
}

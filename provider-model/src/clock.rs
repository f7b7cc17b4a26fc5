//! What the case's simulated clock records of each participant (the clock itself is
//! `fake-control`'s).

/// What the clock saw of one participant (a connector process) that reaches it with a token of
/// its own.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Participant {
    /// Whether it declared that it moves its timers by this clock.
    pub driven: bool,
    /// Calls the harness has in flight on it now.
    pub in_flight: u32,
    /// Sleeps it made that the clock accepted.
    pub sleeps: u64,
    /// Sleeps the clock refused, each with why.
    pub refused: Vec<String>,
    /// The longest any one of the harness's calls on it took, in real milliseconds.
    pub longest_call_real_ms: u64,
}

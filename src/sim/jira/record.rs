//! What the fake saw: every request with the status answered, calls per endpoint, creates per
//! summary.

use super::*;
use std::time::SystemTime;

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When it arrived.
    pub at: SystemTime,
    pub method: String,
    pub path: String,
    pub query: String,
    pub endpoint: Endpoint,
    /// The status answered; 0 when the connection was dropped.
    pub status: u16,
    /// The request's body as sent (empty for a GET).
    pub body: Vec<u8>,
}

impl FakeJira {
    /// How many issues were created over HTTP with this summary.
    pub fn creates_of(&self, summary: &str) -> usize {
        lock(&self.state).creates.get(summary).copied().unwrap_or(0)
    }

    /// Requests to `endpoint`, answered or not (`Endpoint::Any`: all of them).
    pub fn calls(&self, endpoint: Endpoint) -> usize {
        let state = lock(&self.state);
        if endpoint == Endpoint::Any {
            state.calls.values().sum()
        } else {
            state.calls.get(&endpoint).copied().unwrap_or(0)
        }
    }

    pub fn requests(&self) -> Vec<Seen> {
        lock(&self.state).seen.clone()
    }
}

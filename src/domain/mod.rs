//! Rules of the hub with no I/O: what a valid project label, setting or config is, how the base
//! JQL is computed, how times are written.
//!
//! This module knows nothing of SQL, HTTP or files: callers hand it values and it answers with
//! values or a [`ValidationError`] that names the offending field. Everything here is unit tested
//! at the end of its file.

pub mod command;
pub(crate) mod config;
pub mod edit;
pub(crate) mod issue;
pub(crate) mod jql;
pub(crate) mod json;
pub(crate) mod project;
pub(crate) mod settings;
pub(crate) mod sprint;
pub mod time;
pub(crate) mod words;

use std::fmt;

/// A refusal of input: which field is wrong and why, in words for the person who sent it.
///
/// Transports turn it into HTTP 422 or a one-line CLI error; nothing is stored when it is raised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// The field as the sender named it (`label`, `pacing.max_deliveries`, `commands[2].params.key`).
    pub field: String,
    /// What is wrong, in Russian (the spec quotes these messages).
    pub message: String,
}

impl ValidationError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ValidationError {}

/// Compares two secrets in time that depends on their lengths only, not on where they differ
/// (`subtle`, made for exactly this).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

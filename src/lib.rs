//! jira-hub: the hub between a team and its Jira, which sits in an isolated network that only an
//! agent can reach. The hub keeps a mirror of the team's issues and its own notes, a queue of
//! commands for Jira, and answers the agent through a shared folder or HTTP.
//!
//! # Layout
//!
//! - [`domain`]: rules with no I/O (labels, settings, base JQL, the legacy config).
//! - [`store`]: the SQLite database, its schema and migrations; the only module that speaks SQL.
//! - [`service`]: one entry point per operation, used by every transport.
//! - [`relay`]: the shared-folder transport.
//! - [`cli`]: the command line.
//! - [`clock`]: injected time.

pub mod cli;
pub mod clock;
pub mod domain;
pub mod jira;
pub mod protocol;
pub mod relay;
pub mod service;
pub mod store;

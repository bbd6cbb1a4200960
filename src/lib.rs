//! jira-hub: the hub between a team and its Jira, which sits in an isolated network that only an
//! agent can reach. The hub keeps a mirror of the team's issues and its own notes, a queue of
//! commands for Jira, and answers the agent through a shared folder or HTTP.
//!
//! # Layout
//!
//! - [`domain`]: rules with no I/O (labels, settings, base JQL, the legacy config).
//! - [`store`]: the SQLite database, its schema and migrations; the only module that speaks SQL.
//! - [`service`]: one entry point per operation, used by every transport.
//! - [`protocol`]: the agent's messages. [`jira`]: raw Jira issues into mirror rows.
//! - [`relay`]: the shared-folder transport. [`http`]: the HTTP API.
//! - [`daemon`]: `serve`, which runs the relay, the timers and the HTTP listener.
//! - [`cli`]: the command line.
//! - `agent`: `jira-hub agent`, the program inside Jira's network (protocol and domain only).
//! - [`clock`]: injected time.
//! - [`sim`]: the simulated Jira (tests, benchmarks, `jira-hub demo`).

/// `println!` for command output that returns an error instead of panicking when stdout is
/// closed early (`jira-hub status | head -1`); `main` ends quietly on that error.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

/// `print!` with the same rule as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)?
    }};
}

pub(crate) mod agent;
pub mod cli;
pub mod clock;
pub mod daemon;
pub mod domain;
pub mod http;
pub mod jira;
pub mod protocol;
pub mod relay;
pub mod service;
pub mod shutdown;
pub mod sim;
pub mod store;

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
//! - `sharefs`: reading and writing files in a folder others write too (the relay's share).
//! - [`clock`]: injected time. [`logging`]: the log's writer, which never fails.
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

/// The program as the operator started it, for the commands a hint tells them to type: the
/// path it was run by when that has a `/` (`target/release/jira-hub` in a clone, `./jira-hub`),
/// else `jira-hub` (found in `PATH`). A path with characters a shell reads is single-quoted.
pub fn program() -> String {
    let Some(path) = std::env::args_os()
        .next()
        .map(|a| a.to_string_lossy().into_owned())
        .filter(|a| a.contains('/'))
    else {
        return "jira-hub".to_string();
    };
    let plain = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c));
    if plain {
        path
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    }
}

pub(crate) mod agent;
/// The agent's loop on a test's clock (tests only).
#[doc(hidden)]
pub use agent::run_for_test as run_agent_for_test;
pub mod cli;
pub mod clock;
pub mod daemon;
pub mod domain;
pub mod http;
pub(crate) mod instance;
pub mod jira;
pub mod logging;
pub mod protocol;
pub mod relay;
pub mod service;
pub(crate) mod sharefs;
pub mod shutdown;
pub mod sim;
pub mod store;

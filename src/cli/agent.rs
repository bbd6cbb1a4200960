//! `jira-hub agent --config FILE [--once | --check]`: loads the agent's config, turns SIGTERM,
//! SIGINT and SIGHUP (a terminal's hang-up) into a clean stop, and runs [`crate::agent`]. Opens no database.

use super::Outcome;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub(crate) fn agent(config: &Path, once: bool, check: bool) -> anyhow::Result<Outcome> {
    // The signals first: a stop asked for while the config loads is a stop, not a death.
    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, shutdown.clone())?;
    }
    let path = config;
    let config = crate::agent::AgentConfig::load(path)?;
    if check {
        // The preflight (`--check`): one line per check on stdout; exit 1 on any mismatch.
        return Ok(if crate::agent::check(config, shutdown)? {
            Outcome::Success
        } else {
            Outcome::Negative
        });
    }
    if once {
        crate::agent::run_once(config, shutdown)?;
    } else {
        crate::agent::run(config, path, shutdown)?;
    }
    Ok(Outcome::Success)
}

//! `jira-hub agent --config FILE [--once]`: loads the agent's config, turns SIGTERM/SIGINT into a
//! clean stop, and runs [`crate::agent`]. Opens no database.

use super::Outcome;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub(crate) fn agent(config: &Path, once: bool) -> anyhow::Result<Outcome> {
    let config = crate::agent::AgentConfig::load(config)?;
    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, shutdown.clone())?;
    }
    if once {
        crate::agent::run_once(config, shutdown)?;
    } else {
        crate::agent::run(config, shutdown)?;
    }
    Ok(Outcome::Success)
}

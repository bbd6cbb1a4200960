//! `jira-hub sim-jira` (hidden): the demo's simulated Jira alone, for the install test
//! (`scripts/install-test.sh`), which runs the hub and the agent as the README installs them and
//! needs a Jira for them. Seeds the demo's team project, writes the legacy sync config that
//! matches it (the one `jira-hub demo` initialises its hub from), prints where it listens and
//! the account to use, and answers until SIGTERM or SIGINT.

use super::Outcome;
use crate::sim::jira::{self as sim, FakeJira, Mode, PROJECT};
use anyhow::Context;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `jira-hub sim-jira`'s options.
#[derive(Debug, clap::Args)]
pub struct SimJiraArgs {
    /// Write the legacy sync config that matches this Jira here (for `jira-hub init --config`).
    #[arg(long)]
    pub hub_config: Option<PathBuf>,
    /// How many issues the project starts with.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=20_000))]
    pub issues: u64,
}

pub(crate) fn sim_jira(args: SimJiraArgs) -> anyhow::Result<Outcome> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let jira = FakeJira::start(Mode::DataCenter);
    let keys = jira.seed_demo_project(PROJECT, super::demo::LABELS, args.issues as usize, 1);
    if let Some(path) = &args.hub_config {
        std::fs::write(
            path,
            serde_json::to_vec_pretty(&super::demo::legacy_config())?,
        )
        .with_context(|| format!("не удалось записать {}", path.display()))?;
    }
    outln!("jira_url={}", jira.url());
    outln!("jira_user={}", sim::USER);
    outln!("jira_password={}", sim::PASSWORD);
    outln!("project={PROJECT} issues={}", keys.len());
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Outcome::Success)
}

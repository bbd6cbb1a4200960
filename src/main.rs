//! The `jira-hub` binary: parse the command line, set up logging, run, and decide the exit code,
//! here and nowhere else: 0 success, 1 runtime error or refusal, 2 usage error (clap), 3 a
//! database this binary cannot run (systemd's unit does not restart on it).

use clap::Parser;
use jira_hub::cli::{CliError, Outcome};
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = jira_hub::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match jira_hub::cli::run(cli) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Negative) => ExitCode::from(1),
        // The reader went away (`jira-hub status | head -1`): nothing more to say to it.
        Err(CliError::Failed(error)) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(CliError::Failed(error)) => {
            eprintln!("jira-hub: {}", one_line(&error));
            ExitCode::from(1)
        }
        Err(CliError::Unrunnable(why)) => {
            eprintln!("jira-hub: {why}");
            ExitCode::from(3)
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes on one line, each said once: a cause whose text its parent already
/// quotes (`database error: unable to open database file` over `unable to open database file`)
/// is not repeated.
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

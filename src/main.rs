//! The `jira-hub` binary: parse the command line, set up logging, run, map errors to exit codes
//! (0 success, 1 runtime error or refusal, 2 usage error from clap).

use clap::Parser;
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
        Ok(code) => code,
        Err(error) => {
            eprintln!("jira-hub: {error:#}");
            ExitCode::from(1)
        }
    }
}

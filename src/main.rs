//! The `jira-hub` binary: parse the command line, set up logging, run, and decide the exit code,
//! here and nowhere else: 0 success, 1 runtime error or refusal, 2 usage error (clap), 3 a
//! database this binary cannot run (systemd's unit does not restart on it).

use jira_hub::cli::{CliError, LogFormat, Outcome};
use std::io::IsTerminal;
use std::process::ExitCode;

/// jemalloc, with its background purging thread, as the global allocator:
/// - glibc's malloc made cross-thread frees wait on its per-arena locks (the relay maps a refresh
///   page on one thread and frees it on another), and kept what a burst freed: 2,000 waiting HTTP
///   claims left the hub at 84 MB after they went;
/// - mimalloc returns freed pages only when the process allocates again and put its arena on
///   transparent huge pages: the same burst peaked at 230 MB and stayed at 150–190 MB;
/// - jemalloc's background thread purges what stays free for its decay time (10 s) whether or not
///   the hub does anything: the same burst peaks at ~80 MB and falls back under 40 MB
///   (`cargo bench --bench waiting`, docs/design/performance.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = jira_hub::cli::parse();
    // The daemon and the agent log what they do; any other command's output is its answer, and
    // its log says only what went wrong (RUST_LOG still decides when set).
    let daemon = matches!(
        cli.command,
        jira_hub::cli::Command::Serve(_) | jira_hub::cli::Command::Agent { .. }
    );
    setup_logging(cli.log_format, if daemon { "info" } else { "warn" });
    match jira_hub::cli::run(cli) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Negative) => ExitCode::from(1),
        // The reader went away (`jira-hub status | head -1`): nothing more to say to it.
        Err(CliError::Failed(error)) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(CliError::Failed(error)) => {
            jira_hub::logging::say(&format!("jira-hub: {}", one_line(&error)));
            ExitCode::from(1)
        }
        Err(CliError::Unrunnable(why)) => {
            jira_hub::logging::say(&format!("jira-hub: {why}"));
            ExitCode::from(3)
        }
    }
}

/// Logs to stderr, level from `RUST_LOG` (else `default`), in the asked shape; a line stderr
/// cannot take is dropped and counted, never an error (see `jira_hub::logging`).
fn setup_logging(format: LogFormat, default: &str) {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
    };
    let format = match format {
        // systemd sets JOURNAL_STREAM when stderr goes to the journal.
        LogFormat::Auto if std::env::var_os("JOURNAL_STREAM").is_some() => LogFormat::Journal,
        LogFormat::Auto => LogFormat::Plain,
        other => other,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(jira_hub::logging::Stderr);
    match format {
        LogFormat::Journal => builder.with_ansi(false).event_format(JournalLine).init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .event_format(jira_hub::logging::JsonLine)
            .init(),
        _ => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

/// A log line for journald: the syslog priority as `<N>` first (journald reads it, so
/// `journalctl -p warning` works), no timestamp (journald has its own), then the target and the
/// event's fields.
struct JournalLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JournalLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_subscriber::fmt::FormatFields as _;
        let metadata = event.metadata();
        let priority = match *metadata.level() {
            tracing::Level::ERROR => 3,
            tracing::Level::WARN => 4,
            tracing::Level::INFO => 6,
            _ => 7,
        };
        write!(writer, "<{priority}>{}: ", metadata.target())?;
        context.format_fields(writer.by_ref(), event)?;
        writeln!(writer)
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

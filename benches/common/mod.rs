//! What the benchmarks share: sizes from the environment, medians and their printing. Each
//! benchmark uses a part of it.
#![allow(dead_code)]

use std::time::Duration;

/// A size from the environment variable `name`, else `default`.
pub fn size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median of the runs (sorts them).
pub fn median(runs: &mut [Duration]) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The runs in milliseconds, for printing.
pub fn runs(runs: &[Duration]) -> Vec<String> {
    runs.iter().map(|d| format!("{:.1}", ms(*d))).collect()
}

/// `exe serve` on `db` on a free loopback port with `extra` arguments, quiet logs: the child and
/// the address its banner (its first stdout line) names; the rest of its stdout is drained.
pub fn spawn_serve(
    exe: &std::path::Path,
    db: &std::path::Path,
    extra: &[&str],
) -> Result<(std::process::Child, String), Box<dyn std::error::Error + Send + Sync>> {
    use std::io::BufRead;
    let mut child = std::process::Command::new(exe)
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("stdout")?;
    let mut lines = std::io::BufReader::new(stdout).lines();
    let banner = lines.next().ok_or("no banner")??;
    let address = banner
        .rsplit("http://")
        .next()
        .ok_or("no address in the banner")?
        .trim()
        .to_string();
    std::thread::spawn(move || for _ in lines {});
    Ok((child, address))
}

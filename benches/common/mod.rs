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

/// Runs a CLI command of `exe` (this build of the hub or another) on `db`; its stdout.
pub fn cli(
    exe: &std::path::Path,
    db: &std::path::Path,
    args: &[&str],
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let out = std::process::Command::new(exe)
        .arg("--db")
        .arg(db)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "{} {args:?}: {}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Clock ticks per second (`getconf CLK_TCK`; Linux's 100 when it cannot be asked).
pub fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|ticks| *ticks > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of `pid`, in clock ticks (`/proc/<pid>/stat`).
pub fn cpu_ticks(pid: u32) -> std::io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name is in parentheses and may hold spaces: fields count after its `)`;
    // utime and stime are fields 14 and 15, the 12th and 13th after it.
    let after = stat
        .rsplit_once(')')
        .ok_or_else(|| std::io::Error::other("no ) in stat"))?
        .1;
    let field = |n: usize| -> std::io::Result<u64> {
        after
            .split_whitespace()
            .nth(n)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("no field {n} in stat")))
    };
    Ok(field(11)? + field(12)?)
}

/// A `VmRSS:`/`VmHWM:` line of `/proc/<pid>/status`, in KiB.
pub fn status_kib(pid: u32, key: &str) -> std::io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no {key} in /proc/{pid}/status")))
}

/// The size of the WAL beside `db` (0 when there is none).
pub fn wal_bytes(db: &std::path::Path) -> u64 {
    std::fs::metadata(format!("{}-wal", db.display())).map_or(0, |m| m.len())
}

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

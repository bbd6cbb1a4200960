//! The standard `process_*` series of every Prometheus client library ("Process metrics",
//! <https://prometheus.io/docs/instrumenting/writing_clientlibs/#process-metrics>), read from
//! `/proc/self` once per scrape: prometheus-client 0.24 has no process collector (the
//! `prometheus` crate's and `metrics-process` are for other metric libraries). Names, types
//! and units are client_golang's, so dashboards made for any exporter work unchanged. A file
//! that cannot be read (no `/proc`, a kernel that words it otherwise) leaves its series out,
//! never the exposition.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// `/proc/<pid>/stat` gives times in clock ticks of `USER_HZ`, which is 100 on every Linux
/// architecture the hub is built for: prometheus/procfs (`proc_stat.go`, `userHZ = 100`)
/// hard-codes it after checking the same, as `sysconf(_SC_CLK_TCK)` needs `unsafe` here.
const USER_HZ: f64 = 100.0;

/// The process's figures as `/proc` gave them at one scrape.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ProcessFigures {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<i64>,
    pub virtual_bytes: Option<i64>,
    pub virtual_max_bytes: Option<i64>,
    pub open_fds: Option<i64>,
    pub max_fds: Option<i64>,
    pub start_time_seconds: Option<f64>,
    pub threads: Option<i64>,
}

impl ProcessFigures {
    /// This process's figures now.
    pub(crate) fn now() -> ProcessFigures {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let mut figures = ProcessFigures::default();
        if let Some(stat) = read("/proc/self/stat") {
            figures.read_stat(&stat, read("/proc/stat").as_deref());
        }
        if let Some(status) = read("/proc/self/status") {
            figures.resident_bytes = status_kib(&status, "VmRSS:").map(|kib| kib * 1024);
        }
        if let Some(limits) = read("/proc/self/limits") {
            figures.max_fds = soft_limit(&limits, "Max open files");
            // `unlimited` (the usual) is left out: client_golang shows 2^64 - 1 then, a figure
            // no alert can use.
            figures.virtual_max_bytes = soft_limit(&limits, "Max address space");
        }
        figures.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|entries| entries.count() as i64);
        figures
    }

    /// The figures of `/proc/self/stat` (proc(5): utime and stime are its 14th and 15th
    /// fields, num_threads the 20th, starttime the 22nd in ticks since boot, vsize the 23rd in
    /// bytes), the start made absolute with `btime` of `/proc/stat`. The command name (the 2nd
    /// field, in parentheses) may hold spaces and parentheses: fields are counted after its
    /// last `)`.
    fn read_stat(&mut self, stat: &str, system: Option<&str>) {
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return;
        };
        // `rest` starts at the 3rd field (the state).
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        if let (Some(user), Some(system)) = (field(14), field(15)) {
            self.cpu_seconds = Some((user + system) as f64 / USER_HZ);
        }
        self.threads = field(20).map(|n| n as i64);
        self.virtual_bytes = field(23).map(|n| n as i64);
        let boot = system.and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("btime "))
                .and_then(|s| s.trim().parse::<u64>().ok())
        });
        if let (Some(start), Some(boot)) = (field(22), boot) {
            self.start_time_seconds = Some(boot as f64 + start as f64 / USER_HZ);
        }
    }
}

/// A `Name:  1234 kB` line of `/proc/self/status`, in KiB.
fn status_kib(status: &str, name: &str) -> Option<i64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The soft limit of a `/proc/self/limits` row (`Max open files  1024  524288  files`);
/// `None` when it is `unlimited`.
fn soft_limit(limits: &str, name: &str) -> Option<i64> {
    limits
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

impl Collector for ProcessFigures {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(seconds) = self.cpu_seconds {
            let counter = ConstCounter::new(seconds);
            let metric = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        let gauges: [(&str, &str, Option<i64>); 6] = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                self.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                self.virtual_bytes,
            ),
            (
                "process_virtual_memory_max_bytes",
                "Maximum amount of virtual memory available in bytes",
                self.virtual_max_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                self.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                self.max_fds,
            ),
            (
                "process_threads",
                "Number of OS threads in the process",
                self.threads,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
                gauge.encode(metric)?;
            }
        }
        if let Some(start) = self.start_time_seconds {
            let gauge = ConstGauge::new(start);
            let metric = encoder.encode_descriptor(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                None,
                gauge.metric_type(),
            )?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_are_counted_after_the_last_parenthesis_of_the_name() {
        // A command name with a space and a parenthesis, as a renamed thread may have.
        let stat = "4242 (jira hub) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 130 0 0 20 0 7 0 5000 123456789 3000 18446744073709551615";
        let mut figures = ProcessFigures::default();
        figures.read_stat(stat, Some("cpu  1 2 3\nbtime 1764900000\n"));
        assert_eq!(figures.cpu_seconds, Some(3.8));
        assert_eq!(figures.threads, Some(7));
        assert_eq!(figures.virtual_bytes, Some(123_456_789));
        assert_eq!(figures.start_time_seconds, Some(1_764_900_050.0));
    }

    #[test]
    fn limits_read_the_soft_value_and_unlimited_is_none() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n\
                      Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(soft_limit(limits, "Max open files"), Some(1024));
        assert_eq!(soft_limit(limits, "Max address space"), None);
    }

    #[test]
    fn this_process_is_read() {
        let figures = ProcessFigures::now();
        if !std::path::Path::new("/proc/self/stat").exists() {
            println!("skipped: no /proc on this machine");
            return;
        }
        assert!(figures.cpu_seconds.is_some(), "{figures:?}");
        assert!(figures.resident_bytes.is_some_and(|b| b > 0), "{figures:?}");
        assert!(figures.open_fds.is_some_and(|n| n > 0), "{figures:?}");
        assert!(figures.max_fds.is_some(), "{figures:?}");
        assert!(figures.start_time_seconds.is_some(), "{figures:?}");
    }
}

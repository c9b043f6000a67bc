//! Process metrics as the Prometheus client libraries export them, read from `/proc/self`
//! (Linux; elsewhere the family headers are printed without samples).

use std::fmt::Write as _;
use std::fs;

/// `/proc` reports CPU times in clock ticks of `USER_HZ`, which the kernel ABI fixes at 100
/// on every Linux architecture; Prometheus' procfs library assumes the same (`userHZ = 100`).
const USER_HZ: f64 = 100.0;

/// `process_*` metrics of this process.
#[derive(Debug, Default)]
pub struct ProcessMetrics;

/// What `/proc/self` says; each field absent when it could not be read.
#[derive(Debug, Default, PartialEq)]
struct Sample {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<u64>,
    virtual_bytes: Option<u64>,
    start_time_seconds: Option<f64>,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
}

impl ProcessMetrics {
    /// The metrics in the Prometheus text format.
    pub fn render_prometheus(&self) -> String {
        render(&read())
    }
}

fn read() -> Sample {
    let stat = fs::read_to_string("/proc/self/stat").ok();
    let fields = stat.as_deref().and_then(stat_fields);
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let btime = fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<u64>().ok())
    });
    let tick = |i: usize| fields.as_ref()?.get(i)?.parse::<u64>().ok();
    Sample {
        // utime + stime (fields 14 and 15 of stat(5), 1-based).
        cpu_seconds: tick(13)
            .zip(tick(14))
            .map(|(u, s)| (u + s) as f64 / USER_HZ),
        resident_bytes: status_kb(&status, "VmRSS:"),
        virtual_bytes: status_kb(&status, "VmSize:"),
        // starttime (field 22): ticks after boot.
        start_time_seconds: tick(21)
            .zip(btime)
            .map(|(t, b)| b as f64 + t as f64 / USER_HZ),
        open_fds: fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64),
        max_fds: fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| max_open_files(&l)),
    }
}

/// The fields of `/proc/self/stat`, 0-based; the command name (field 2, in parentheses,
/// may contain spaces) is skipped by cutting after the last `)`.
fn stat_fields(stat: &str) -> Option<Vec<String>> {
    let (head, rest) = stat.rsplit_once(')')?;
    let pid = head.split_whitespace().next()?;
    let mut out = vec![pid.to_string(), String::new()];
    out.extend(rest.split_whitespace().map(str::to_string));
    Some(out)
}

/// `Key:   1234 kB` from `/proc/self/status`, in bytes.
fn status_kb(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix(key))?;
    let kb: u64 = line.split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024)
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

fn render(s: &Sample) -> String {
    let mut out = String::with_capacity(1024);
    let families: [(&str, &str, &str, Option<f64>); 6] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            s.cpu_seconds,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            s.resident_bytes.map(|v| v as f64),
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            s.virtual_bytes.map(|v| v as f64),
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            s.start_time_seconds,
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            s.open_fds.map(|v| v as f64),
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            s.max_fds.map(|v| v as f64),
        ),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        if let Some(v) = value {
            let _ = writeln!(out, "{name} {v}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_and_parentheses_in_the_command() {
        let stat = "42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 1 0 1000 0 0";
        let f = stat_fields(stat).unwrap();
        assert_eq!(f[0], "42");
        assert_eq!(f[2], "S");
        assert_eq!((f[13].as_str(), f[14].as_str()), ("250", "150"));
        assert_eq!(f[21], "1000");
    }

    #[test]
    fn reads_limits_and_status() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 4096                 files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(
            status_kb("VmRSS:\t  2048 kB\n", "VmRSS:"),
            Some(2 * 1024 * 1024)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_every_value() {
        let s = read();
        assert!(s.cpu_seconds.is_some() && s.resident_bytes.unwrap() > 0);
        assert!(s.virtual_bytes.unwrap() >= s.resident_bytes.unwrap());
        assert!(s.open_fds.unwrap() >= 3 && s.max_fds.unwrap() >= s.open_fds.unwrap());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = s.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start}"
        );
    }
}

//! REST client metrics with client-go's names, rendered in the Prometheus text format.

use crate::prometheus::escape_label;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use parking_lot::Mutex;

/// Code label of a request that got no HTTP answer (client-go spells it the same way).
pub const ERROR_CODE: &str = "<error>";

/// Latency bucket bounds in seconds: client-go's `rest_client_request_duration_seconds`.
const BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// The same bounds as `le` labels, spelled as Go's client prints them.
const BUCKET_LABELS: [&str; 12] = [
    "0.005", "0.025", "0.1", "0.25", "0.5", "1", "2", "4", "8", "15", "30", "60",
];

/// Per-bucket counts (not cumulative) plus count and sum, for one label set.
#[derive(Clone, Debug, Default)]
struct Histogram {
    buckets: [u64; 12],
    count: u64,
    /// Integer nanoseconds, so the rendered sum carries no float drift.
    sum_nanos: u64,
}

/// Request counts and latencies of one [`Client`](super::Client) and its clones.
///
/// `rest_client_requests_total{code,method,host}` counts every HTTP attempt (a retry after
/// a 401 counts twice), `code` being the status or `<error>` when no answer came.
/// `rest_client_request_duration_seconds{verb,host}` times each attempt from sending to the
/// answer's head: client-side throttling and reading a body are not included, so a watch
/// counts the time to open it.
#[derive(Debug, Default)]
pub struct RestMetrics {
    /// (code, method, host) → count. A mutex around a small map: a handful of label sets,
    /// one lock per request, far below the cost of the request itself.
    requests: Mutex<BTreeMap<(String, &'static str, String), u64>>,
    /// (verb, host) → latency histogram.
    durations: Mutex<BTreeMap<(&'static str, String), Histogram>>,
}

impl RestMetrics {
    /// Empty metrics.
    pub fn new() -> Self {
        RestMetrics::default()
    }

    /// Records one attempt: `code` is the HTTP status or [`ERROR_CODE`].
    pub fn observe(&self, code: &str, method: &'static str, host: &str, elapsed: Duration) {
        *self
            .requests
            .lock()
            .entry((code.to_string(), method, host.to_string()))
            .or_insert(0) += 1;
        let secs = elapsed.as_secs_f64();
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let mut durations = self.durations.lock();
        let h = durations.entry((method, host.to_string())).or_default();
        if let Some(i) = BUCKETS.iter().position(|&b| secs <= b) {
            h.buckets[i] += 1;
        }
        h.count += 1;
        h.sum_nanos = h.sum_nanos.saturating_add(nanos);
    }

    /// Both metric families in the Prometheus text exposition format (headers always present).
    pub fn render_prometheus(&self) -> String {
        let mut out = String::with_capacity(2048);
        let _ = writeln!(
            out,
            "# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host."
        );
        let _ = writeln!(out, "# TYPE rest_client_requests_total counter");
        for ((code, method, host), n) in self.requests.lock().iter() {
            let _ = writeln!(
                out,
                "rest_client_requests_total{{code=\"{}\",host=\"{}\",method=\"{method}\"}} {n}",
                escape_label(code),
                escape_label(host)
            );
        }
        let metric = "rest_client_request_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {metric} Request latency in seconds. Broken down by verb, and host."
        );
        let _ = writeln!(out, "# TYPE {metric} histogram");
        // Copy out so the lock is not held while formatting.
        let durations = self.durations.lock().clone();
        for ((verb, host), h) in &durations {
            let labels = format!("host=\"{}\",verb=\"{verb}\"", escape_label(host));
            let mut cumulative = 0;
            for (n, le) in h.buckets.iter().zip(BUCKET_LABELS) {
                cumulative += n;
                let _ = writeln!(out, "{metric}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
            }
            let _ = writeln!(out, "{metric}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
            let sum = h.sum_nanos as f64 / 1e9;
            let _ = writeln!(out, "{metric}_sum{{{labels}}} {sum}");
            let _ = writeln!(out, "{metric}_count{{{labels}}} {}", h.count);
        }
        out
    }
}

/// The `host` label of a server URL: its authority (`host:port`), as client-go's `url.Host`.
pub(crate) fn host_label(server: &str) -> String {
    let rest = server.split_once("://").map_or(server, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    // Credentials in a URL never reach a label.
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, h)| h)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn requests_are_counted_per_code_method_and_host() {
        let m = RestMetrics::new();
        m.observe("200", "GET", "h:1", ms(1));
        m.observe("200", "GET", "h:1", ms(1));
        m.observe("404", "GET", "h:1", ms(1));
        m.observe(ERROR_CODE, "PUT", "h:1", ms(1));
        let out = m.render_prometheus();
        assert!(
            out.contains(
                "rest_client_requests_total{code=\"200\",host=\"h:1\",method=\"GET\"} 2\n"
            ),
            "{out}"
        );
        assert!(out.contains("{code=\"404\",host=\"h:1\",method=\"GET\"} 1\n"));
        assert!(out.contains("{code=\"<error>\",host=\"h:1\",method=\"PUT\"} 1\n"));
    }

    #[test]
    fn latency_buckets_are_client_go_s_inclusive_and_cumulative() {
        let m = RestMetrics::new();
        m.observe("200", "GET", "h", ms(5)); // exactly 0.005
        m.observe("200", "GET", "h", ms(30));
        m.observe("200", "GET", "h", Duration::from_secs(61)); // beyond 60: only +Inf
        let out = m.render_prometheus();
        let b = "rest_client_request_duration_seconds_bucket{host=\"h\",verb=\"GET\"";
        assert!(out.contains(&format!("{b},le=\"0.005\"}} 1\n")), "{out}");
        assert!(out.contains(&format!("{b},le=\"0.025\"}} 1\n")), "{out}");
        assert!(out.contains(&format!("{b},le=\"0.1\"}} 2\n")), "{out}");
        assert!(out.contains(&format!("{b},le=\"60\"}} 2\n")), "{out}");
        assert!(out.contains(&format!("{b},le=\"+Inf\"}} 3\n")), "{out}");
        assert!(
            out.contains("rest_client_request_duration_seconds_count{host=\"h\",verb=\"GET\"} 3\n")
        );
        assert!(out.contains(
            "rest_client_request_duration_seconds_sum{host=\"h\",verb=\"GET\"} 61.035\n"
        ));
    }

    #[test]
    fn empty_metrics_still_declare_both_families() {
        let out = RestMetrics::new().render_prometheus();
        assert!(out.contains("# TYPE rest_client_requests_total counter\n"));
        assert!(out.contains("# TYPE rest_client_request_duration_seconds histogram\n"));
        assert_eq!(out.lines().filter(|l| !l.starts_with('#')).count(), 0);
    }

    #[test]
    fn host_label_is_the_url_authority() {
        assert_eq!(host_label("https://10.0.0.1:6443"), "10.0.0.1:6443");
        assert_eq!(host_label("http://127.0.0.1:8080/prefix"), "127.0.0.1:8080");
        assert_eq!(host_label("https://user:pw@example.com"), "example.com");
        assert_eq!(host_label("https://[::1]:6443"), "[::1]:6443");
    }

    #[test]
    fn label_values_are_escaped() {
        let m = RestMetrics::new();
        m.observe("200", "GET", "a\"b\\c", ms(1));
        assert!(m.render_prometheus().contains("host=\"a\\\"b\\\\c\""));
    }
}

//! What the controller itself did, for `/metrics`: syncs per table cell, the sizes of the
//! desired and managed sets, and manifest reloads.
//!
//! Counters live here; the gauges are counted from the controller's state at scrape time
//! ([`Gauges`]), so they can never drift from what the controller holds.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::decision::Cell;

/// The `result` label of `autoregister_syncs_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncResult {
    /// A write succeeded (or was answered with a benign NotFound/Conflict/AlreadyExists).
    Ok,
    /// The write or the lookup failed; the name is retried with backoff.
    Error,
    /// Nothing to write in this cell ("left alone").
    Skipped,
}

impl SyncResult {
    /// The label value: `ok`, `error`, `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncResult::Ok => "ok",
            SyncResult::Error => "error",
            SyncResult::Skipped => "skipped",
        }
    }
}

/// The outcome of one manifest reload (the `result` label of `autoregister_manifest_reloads_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReloadResult {
    /// Every file parsed.
    Ok,
    /// At least one file failed to parse (its last good objects were kept).
    Error,
}

impl ReloadResult {
    /// The label value: `ok`, `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadResult::Ok => "ok",
            ReloadResult::Error => "error",
        }
    }
}

/// Set sizes counted when `/metrics` is scraped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Names in the desired set.
    pub desired: usize,
    /// Cached APIServices that carry our ownership label.
    pub managed: usize,
    /// Desired names held by an object without our label (left alone).
    pub unowned_desired: usize,
    /// Names whose writes another writer keeps undoing (see `FightDetector`).
    pub fighting: usize,
}

/// The controller's own counters; one per [`Controller`](super::Controller), passed explicitly.
#[derive(Debug, Default)]
pub struct ControllerMetrics {
    syncs: Mutex<BTreeMap<(Cell, SyncResult), u64>>,
    reloads: Mutex<BTreeMap<ReloadResult, u64>>,
    last_reload_success: Mutex<Option<SystemTime>>,
}

impl ControllerMetrics {
    /// Empty counters.
    pub fn new() -> ControllerMetrics {
        ControllerMetrics::default()
    }

    /// Counts one sync of a name decided in `cell`.
    pub fn observe_sync(&self, cell: Cell, result: SyncResult) {
        *self.syncs.lock().entry((cell, result)).or_insert(0) += 1;
    }

    /// Counts one manifest (re)load; a successful one also sets the last-success timestamp.
    /// The manifest reload loop calls this once per reload it performs.
    pub fn manifest_reload(&self, result: ReloadResult) {
        *self.reloads.lock().entry(result).or_insert(0) += 1;
        if result == ReloadResult::Ok {
            *self.last_reload_success.lock() = Some(SystemTime::now());
        }
    }

    /// How many syncs in `cell` ended with `result` (for tests and embedders).
    pub fn syncs(&self, cell: Cell, result: SyncResult) -> u64 {
        self.syncs.lock().get(&(cell, result)).copied().unwrap_or(0)
    }

    /// The counters and `gauges` in the Prometheus text format (every header always present).
    pub fn render_prometheus(&self, gauges: Gauges) -> String {
        let mut out = String::with_capacity(1024);
        header(
            &mut out,
            "autoregister_syncs_total",
            "counter",
            "Syncs of one APIService name, by decision-table cell and result (ok, error, skipped).",
        );
        for ((cell, result), n) in self.syncs.lock().iter() {
            let _ = writeln!(
                out,
                "autoregister_syncs_total{{cell=\"{cell}\",result=\"{}\"}} {n}",
                result.as_str()
            );
        }
        for (name, help, value) in [
            (
                "autoregister_desired_apiservices",
                "APIService names in the desired set.",
                gauges.desired,
            ),
            (
                "autoregister_managed_apiservices",
                "Cached APIServices that carry this controller's ownership label.",
                gauges.managed,
            ),
            (
                "autoregister_unowned_desired_apiservices",
                "Desired APIService names held by an object without this controller's ownership label (left alone).",
                gauges.unowned_desired,
            ),
            (
                "autoregister_apiservices_in_fight",
                "APIService names whose writes another writer keeps undoing (each put-back paced, at most --fight-backoff-max apart).",
                gauges.fighting,
            ),
        ] {
            header(&mut out, name, "gauge", help);
            let _ = writeln!(out, "{name} {value}");
        }
        header(
            &mut out,
            "autoregister_manifest_reloads_total",
            "counter",
            "Manifest reloads, by result (error: a file did not parse and kept its last good objects).",
        );
        let reloads = self.reloads.lock().clone();
        // Both series from the start, so rate() and increase() see the first error.
        for result in [ReloadResult::Error, ReloadResult::Ok] {
            let n = reloads.get(&result).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "autoregister_manifest_reloads_total{{result=\"{}\"}} {n}",
                result.as_str()
            );
        }
        let name = "autoregister_manifest_last_reload_success_timestamp_seconds";
        header(
            &mut out,
            name,
            "gauge",
            "Unix time of the last manifest reload in which every file parsed (0: none yet).",
        );
        let at = self
            .last_reload_success
            .lock()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64());
        let _ = writeln!(out, "{name} {at:.3}");
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_syncs_by_cell_and_result_and_both_reload_series() {
        let m = ControllerMetrics::new();
        let c6 = Cell::new(6, 'C').unwrap();
        m.observe_sync(c6, SyncResult::Ok);
        m.observe_sync(c6, SyncResult::Ok);
        m.observe_sync(Cell::new(3, 'C').unwrap(), SyncResult::Skipped);
        let text = m.render_prometheus(Gauges {
            desired: 3,
            managed: 2,
            unowned_desired: 1,
            fighting: 1,
        });
        assert!(text.contains("autoregister_syncs_total{cell=\"6C\",result=\"ok\"} 2\n"));
        assert!(text.contains("autoregister_syncs_total{cell=\"3C\",result=\"skipped\"} 1\n"));
        assert!(text.contains("autoregister_unowned_desired_apiservices 1\n"));
        assert!(text.contains("autoregister_apiservices_in_fight 1\n"));
        assert!(text.contains("autoregister_manifest_reloads_total{result=\"error\"} 0\n"));
        assert!(
            text.contains("autoregister_manifest_last_reload_success_timestamp_seconds 0.000\n")
        );
        m.manifest_reload(ReloadResult::Ok);
        let text = m.render_prometheus(Gauges::default());
        assert!(text.contains("autoregister_manifest_reloads_total{result=\"ok\"} 1\n"));
        assert!(!text.contains("timestamp_seconds 0.000\n"), "{text}");
        assert_eq!(m.syncs(c6, SyncResult::Ok), 2);
    }
}

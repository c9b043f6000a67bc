//! `/metrics`: the text of every registry merged into one valid Prometheus exposition.
//!
//! Each registry renders itself with its own `HELP`/`TYPE` headers (two workqueues would
//! both print `# TYPE workqueue_depth gauge`), and the text format allows one header and
//! one contiguous group of samples per family. [`compose`] regroups the samples by family
//! in first-seen order and keeps the first header of each.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::client::RestMetrics;
use crate::runtime::workqueue::QueueMetrics;

/// `Content-Type` of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Something that renders metrics in the Prometheus text format.
pub trait MetricsSource: Send + Sync {
    /// The current values, text format, headers included.
    fn render_prometheus(&self) -> String;
}

impl MetricsSource for QueueMetrics {
    fn render_prometheus(&self) -> String {
        QueueMetrics::render_prometheus(self)
    }
}

impl MetricsSource for RestMetrics {
    fn render_prometheus(&self) -> String {
        RestMetrics::render_prometheus(self)
    }
}

impl MetricsSource for super::ProcessMetrics {
    fn render_prometheus(&self) -> String {
        super::ProcessMetrics::render_prometheus(self)
    }
}

impl MetricsSource for crate::runtime::leader::LeaderMetrics {
    fn render_prometheus(&self) -> String {
        crate::runtime::leader::LeaderMetrics::render_prometheus(self)
    }
}

impl<F: Fn() -> String + Send + Sync> MetricsSource for F {
    fn render_prometheus(&self) -> String {
        self()
    }
}

/// Renders every source and merges the texts with [`compose`].
pub(crate) fn render_all(sources: &[Arc<dyn MetricsSource>]) -> String {
    let texts: Vec<String> = sources.iter().map(|s| s.render_prometheus()).collect();
    compose(&texts)
}

#[derive(Default)]
struct Family {
    help: Option<String>,
    kind: Option<String>,
    samples: Vec<String>,
}

/// Merges Prometheus texts: one `HELP`/`TYPE` per family (the first seen), each family's
/// samples together, families in first-seen order; a repeated series keeps its first value.
pub fn compose(texts: &[String]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut families: HashMap<String, Family> = HashMap::new();
    let mut series: HashSet<String> = HashSet::new();
    for text in texts {
        // A family's header only covers samples of the same text.
        let mut current: Option<String> = None;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(comment) = line.strip_prefix('#') {
                let mut parts = comment.trim_start().splitn(3, ' ');
                let (Some(keyword @ ("HELP" | "TYPE")), Some(name)) = (parts.next(), parts.next())
                else {
                    continue; // other comments carry nothing a scraper needs
                };
                let rest = parts.next().unwrap_or("").to_string();
                let family = family_mut(&mut order, &mut families, name);
                let slot = if keyword == "HELP" {
                    &mut family.help
                } else {
                    &mut family.kind
                };
                slot.get_or_insert(rest);
                current = Some(name.to_string());
                continue;
            }
            let name = sample_name(line);
            let family_name = match &current {
                Some(f) if belongs_to(name, f) => f.clone(),
                _ => {
                    current = Some(name.to_string());
                    name.to_string()
                }
            };
            if series.insert(series_key(line).to_string()) {
                family_mut(&mut order, &mut families, &family_name)
                    .samples
                    .push(without_negative_zero(line));
            }
        }
    }
    let mut out = String::with_capacity(texts.iter().map(String::len).sum());
    for name in &order {
        let Some(f) = families.get(name) else {
            continue;
        };
        if let Some(help) = &f.help {
            out.push_str(&format!("# HELP {name} {help}\n"));
        }
        if let Some(kind) = &f.kind {
            out.push_str(&format!("# TYPE {name} {kind}\n"));
        }
        for s in &f.samples {
            out.push_str(s);
            out.push('\n');
        }
    }
    out
}

fn family_mut<'a>(
    order: &mut Vec<String>,
    families: &'a mut HashMap<String, Family>,
    name: &str,
) -> &'a mut Family {
    if !families.contains_key(name) {
        order.push(name.to_string());
    }
    families.entry(name.to_string()).or_default()
}

/// A sample line whose value reads `-0` (a float sum of nothing, a rounding) as `0`:
/// valid to a parser, but alarming to a person and noise to a diff.
fn without_negative_zero(line: &str) -> String {
    match line.rsplit_once(' ') {
        Some((series, value)) if value.parse::<f64>().is_ok_and(|v| v == 0.0) => {
            format!("{series} 0")
        }
        _ => line.to_string(),
    }
}

/// The metric name at the start of a sample line.
fn sample_name(line: &str) -> &str {
    let end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    &line[..end]
}

/// Whether sample `name` is part of `family` (histograms and summaries add suffixes).
fn belongs_to(name: &str, family: &str) -> bool {
    match name.strip_prefix(family) {
        Some("") => true,
        Some(suffix) => matches!(suffix, "_bucket" | "_sum" | "_count"),
        None => false,
    }
}

/// Name and labels of a sample, without its value.
fn series_key(line: &str) -> &str {
    match line.rfind('}') {
        Some(i) if line.contains('{') => &line[..=i],
        _ => sample_name(line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_sample_reads_negative_zero() {
        let out =
            compose(&["# TYPE m gauge\nm{a=\"b\"} -0\nm{a=\"c\"} -0.0\nm{a=\"d\"} 2.5\n".into()]);
        assert_eq!(
            out,
            "# TYPE m gauge\nm{a=\"b\"} 0\nm{a=\"c\"} 0\nm{a=\"d\"} 2.5\n"
        );
    }

    #[test]
    fn two_queues_share_one_header_per_family() {
        let a = QueueMetrics::new("a", Arc::new(crate::runtime::clock::RealClock));
        let b = QueueMetrics::new("b", Arc::new(crate::runtime::clock::RealClock));
        let out = compose(&[a.render_prometheus(), b.render_prometheus()]);
        assert_eq!(
            out.matches("# TYPE workqueue_depth gauge\n").count(),
            1,
            "{out}"
        );
        assert_eq!(out.matches("# HELP workqueue_depth ").count(), 1);
        // Both queues' samples follow the single header, together.
        let depth = out
            .find("# TYPE workqueue_depth gauge\n")
            .map(|i| &out[i..])
            .unwrap_or("");
        let mut lines = depth.lines().skip(1);
        assert_eq!(lines.next(), Some("workqueue_depth{name=\"a\"} 0"));
        assert_eq!(lines.next(), Some("workqueue_depth{name=\"b\"} 0"));
        assert_eq!(out.matches("# TYPE ").count(), 7);
    }

    #[test]
    fn histogram_samples_stay_with_their_family() {
        let text = "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 0.5\nh_count 1\n";
        let out = compose(&[text.to_string(), "# TYPE g gauge\ng 3\n".to_string()]);
        assert_eq!(out, format!("{text}# TYPE g gauge\ng 3\n"));
    }

    #[test]
    fn headerless_samples_form_their_own_family_and_repeats_are_dropped() {
        let out = compose(&[
            "# HELP c help text\n# TYPE c counter\nc{x=\"1\"} 1\nother 5\n".to_string(),
            "# TYPE c counter\nc{x=\"1\"} 9\nc{x=\"2\"} 2\n# random comment\n".to_string(),
        ]);
        assert_eq!(
            out,
            "# HELP c help text\n# TYPE c counter\nc{x=\"1\"} 1\nc{x=\"2\"} 2\nother 5\n"
        );
    }
}

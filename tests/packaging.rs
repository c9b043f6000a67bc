//! How operators install and watch the controller, run with the real tools: the Helm chart
//! (`charts/autoregister`) linted, rendered and installed, upgraded and uninstalled by helm
//! on the real kube-apiserver, and its default render equal to `deploy/`; the kustomize
//! base and its overlay rendered by kubectl and accepted by the server; the alert rules
//! checked and unit tested by promtool on series recorded from the binary's `/metrics`, and
//! the dashboard's and the rules' metric names checked against a real scrape.
//! helm and promtool come from `make tools` (scripts/tools-build.sh).
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/kube.rs"]
mod kube;
#[path = "support/markdown.rs"]
mod markdown;
#[path = "support/promtext.rs"]
mod promtext;
#[path = "support/tls_backend.rs"]
mod tls_backend;
#[path = "support/tools.rs"]
mod tools;

// The chart: defaults = deploy/, lint, schema, install/upgrade/uninstall.
#[path = "packaging/chart.rs"]
mod chart;
// The kustomize base and overlay.
#[path = "packaging/kustomize.rs"]
mod kustomize;
// Alerts and dashboard against the binary's metrics.
#[path = "packaging/monitoring.rs"]
mod monitoring;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// The repository's root.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The chart's folder.
fn chart_dir() -> PathBuf {
    repo().join("charts/autoregister")
}

/// Every non-empty document of a YAML stream, as JSON.
fn yaml_docs(text: &str, what: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{what}: {e}\n{text}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// Every object of the `*.yaml` files directly in `dir`, sorted by file name.
fn objects_in(dir: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            yaml_docs(
                &std::fs::read_to_string(f).unwrap(),
                &f.display().to_string(),
            )
        })
        .collect()
}

/// An object's identity: `Kind namespace/name` (namespace empty for cluster scope).
fn id(v: &Value) -> String {
    format!(
        "{} {}/{}",
        v["kind"].as_str().unwrap_or("?"),
        v["metadata"]["namespace"].as_str().unwrap_or(""),
        v["metadata"]["name"].as_str().unwrap_or("?")
    )
}

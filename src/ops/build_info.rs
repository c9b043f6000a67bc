//! `autoregister_build_info`: which build is running, as Kubernetes components export
//! `kubernetes_build_info` (a gauge of 1 whose labels carry the facts).

use crate::build_info::{COMMIT, VERSION};
use crate::prometheus::escape_label;

/// The build-info metric source (version and git commit of this build).
#[derive(Clone, Copy, Debug, Default)]
pub struct BuildInfo;

impl BuildInfo {
    /// The family in the Prometheus text format.
    pub fn render_prometheus(&self) -> String {
        format!(
            "# HELP autoregister_build_info A metric with a constant '1' value labeled by the \
             version and git commit autoregister was built from.\n\
             # TYPE autoregister_build_info gauge\n\
             autoregister_build_info{{version=\"{}\",commit=\"{}\"}} 1\n",
            escape_label(VERSION),
            escape_label(COMMIT)
        )
    }
}

impl super::MetricsSource for BuildInfo {
    fn render_prometheus(&self) -> String {
        BuildInfo::render_prometheus(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_of_one_with_version_and_commit() {
        let text = BuildInfo.render_prometheus();
        let sample = format!(
            "autoregister_build_info{{version=\"{}\",commit=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION"),
            COMMIT
        );
        assert!(text.ends_with(&sample), "{text}");
        assert!(text.contains("# TYPE autoregister_build_info gauge\n"));
    }
}

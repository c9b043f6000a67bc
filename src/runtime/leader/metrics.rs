//! `leader_election_master_status{name}`: client-go's gauge, 1 while this process leads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::prometheus::escape_label;

/// Whether this candidate leads the lease `name`; set from the elector's callbacks.
#[derive(Debug)]
pub struct LeaderMetrics {
    name: String,
    leading: AtomicBool,
}

impl LeaderMetrics {
    /// A gauge for the lease `name` (the `name` label), 0 until leadership starts.
    pub fn new(name: impl Into<String>) -> Arc<LeaderMetrics> {
        Arc::new(LeaderMetrics {
            name: name.into(),
            leading: AtomicBool::new(false),
        })
    }

    /// Records that leadership started (`true`) or ended (`false`).
    pub fn set_leading(&self, leading: bool) {
        self.leading.store(leading, Ordering::SeqCst);
    }

    /// Whether this candidate leads now.
    pub fn is_leading(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }

    /// The gauge in the Prometheus text format.
    pub fn render_prometheus(&self) -> String {
        format!(
            "# HELP leader_election_master_status Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.\n\
             # TYPE leader_election_master_status gauge\n\
             leader_election_master_status{{name=\"{}\"}} {}\n",
            escape_label(&self.name),
            u8::from(self.is_leading())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_while_leading() {
        let m = LeaderMetrics::new("autoregister");
        assert!(m
            .render_prometheus()
            .ends_with("{name=\"autoregister\"} 0\n"));
        m.set_leading(true);
        assert!(m
            .render_prometheus()
            .ends_with("{name=\"autoregister\"} 1\n"));
    }
}

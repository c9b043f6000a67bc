//! What the operations endpoint reports: metric sources and readiness checks.

use std::sync::Arc;

use super::health::ReadyCheck;
use super::metrics::MetricsSource;
use crate::controller::Controller;

/// The metric sources and readiness checks an [`OpsServer`](super::OpsServer) serves.
#[derive(Clone, Default)]
pub struct OpsSources {
    pub(crate) metrics: Vec<Arc<dyn MetricsSource>>,
    pub(crate) checks: Vec<(String, ReadyCheck)>,
    /// Liveness checks for `/livez` and `/healthz`.
    pub(crate) health: Vec<(String, ReadyCheck)>,
}

impl OpsSources {
    /// Nothing to report: `/metrics` is empty and `/readyz` always ready.
    pub fn new() -> Self {
        OpsSources::default()
    }

    /// The controller's own, workqueue, REST client and process metrics, readiness once its
    /// cache synced, and liveness from its heartbeats (reflector, workers, and whatever else
    /// registered there, e.g. the manifest watcher).
    pub fn for_controller(controller: &Controller) -> Self {
        let c = controller.clone();
        let own = controller.clone();
        let reach = controller.clone();
        let liveness = controller.liveness().clone();
        OpsSources::new()
            .health_check("threads", move || liveness.check())
            .metrics(Arc::new(move || own.render_metrics()))
            .metrics(controller.queue_metrics())
            .metrics(controller.client().metrics().clone())
            .metrics(Arc::new(super::ProcessMetrics))
            .metrics(Arc::new(super::BuildInfo))
            .readiness_check("apiserver-reachable", move || match reach.unreachable() {
                // Alive (healthz stays 200) but not doing its job: writes wait for the server.
                Some((down, why)) => Err(format!(
                    "the API server has not answered for {:.0}s ({why}); writes paused",
                    down.as_secs_f64()
                )),
                None => Ok(()),
            })
            .readiness_check("apiservice-cache-synced", move || {
                // A controller not started yet (a standby waiting for leadership) has no
                // cache to wait for; it is ready to take over.
                if c.is_synced() || !c.is_started() {
                    Ok(())
                } else {
                    Err("the APIService cache has not synced yet".into())
                }
            })
    }

    /// Adds a metric source to `/metrics`.
    pub fn metrics(mut self, source: Arc<dyn MetricsSource>) -> Self {
        self.metrics.push(source);
        self
    }

    /// Adds a named liveness check to `/livez` and `/healthz`: `503` naming it and its reason while it
    /// fails (a thread the process needs has died or is stuck), so the kubelet restarts us.
    pub fn health_check(
        mut self,
        name: &str,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.health.push((name.to_string(), Arc::new(check)));
        self
    }

    /// Adds a named readiness check to `/readyz` (e.g. "leader"); all checks must pass.
    pub fn readiness_check(
        mut self,
        name: &str,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.checks.push((name.to_string(), Arc::new(check)));
        self
    }
}

impl std::fmt::Debug for OpsSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let checks: Vec<&str> = self.checks.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("OpsSources")
            .field("metrics", &self.metrics.len())
            .field("checks", &checks)
            .field("health", &self.health.len())
            .finish()
    }
}

//! Builds the API client from the connection flags.

use autoregister::client::{Client, Config, ConnectOptions};

use super::args::KubeArgs;
use super::Failure;

/// A client for the cluster the flags (or KUBECONFIG, ~/.kube/config, in-cluster) point at;
/// a bad kubeconfig is a usage failure (exit 2).
pub fn client(kube: &KubeArgs) -> Result<Client, Failure> {
    let opts = ConnectOptions {
        kubeconfig: kube.kubeconfig.clone(),
        context: kube.context.clone(),
        server: kube.server.clone(),
    };
    // A bare `--server host:port` gets its scheme now, so the log names the real URL.
    let mut config = Config::infer(&opts)
        .map_err(|e| Failure::usage([e]))?
        .with_default_scheme();
    let (qps, burst) = kube.limits();
    config.qps = qps;
    config.burst = burst;
    // An explicit limit wins over what the server says about flow control.
    config.detect_flow_control = kube.qps.is_none() && kube.burst.is_none();
    log::info!("connecting to {} ({})", config.server, config.origin);
    Client::new(config).map_err(|e| Failure::usage([format!("cannot build the client: {e}")]))
}

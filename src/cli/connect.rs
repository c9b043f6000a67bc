//! Builds the API client from the connection flags.

use autoregister::client::{redact_url, Client, Config, ConnectOptions, Impersonation};

use super::args::KubeArgs;
use super::Failure;

/// Set to `off`, writes are not held after a 429 (each meets its own): the comparison run
/// of the seat-limited benchmark.
const THROTTLE_WRITES_ENV: &str = "AUTOREGISTER_THROTTLE_WRITES";

/// A client for the cluster the flags (or KUBECONFIG, ~/.kube/config, in-cluster) point at;
/// a bad kubeconfig is a usage failure (exit 2).
pub fn client(kube: &KubeArgs) -> Result<Client, Failure> {
    let opts = ConnectOptions {
        kubeconfig: kube.kubeconfig.clone(),
        context: kube.context.clone(),
        server: kube.server.clone(),
        impersonate: Impersonation {
            user: kube.as_user.clone().filter(|u| !u.is_empty()),
            uid: kube.as_uid.clone().filter(|u| !u.is_empty()),
            groups: kube.as_groups.clone(),
            extra: Vec::new(),
        },
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
    // Not a user setting: the benchmark measures the client-wide 429 hold against its absence.
    if std::env::var_os(THROTTLE_WRITES_ENV).is_some_and(|v| v == "off") {
        config.throttle_writes = false;
    }
    // The server is already without userinfo (it became basic auth); redacted all the same,
    // as every URL this program prints.
    log::info!(
        "connecting to {} ({})",
        redact_url(&config.server),
        config.origin
    );
    if let Some(user) = &config.impersonate.user {
        log::info!("acting as user {user:?} (impersonation)");
    }
    let client = Client::new(config)
        .map_err(|e| Failure::usage([format!("cannot build the client: {e}")]))?;
    if let Some(proxy) = client.proxy() {
        log::info!("using proxy {proxy}");
    }
    Ok(client)
}

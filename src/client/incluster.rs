//! In-cluster configuration: the service's env variables and the mounted service-account token.

use std::path::Path;

use super::config::{AuthConfig, Config};
use super::infer::ConfigError;

/// The configuration of a pod: `https://HOST:PORT`, the mounted CA, the rotating token file.
pub(crate) fn config(host: &str, port: &str, dir: &Path) -> Result<Config, ConfigError> {
    // An IPv6 service address needs brackets in a URL.
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    if port.parse::<u16>().is_err() {
        return Err(ConfigError::new(format!(
            "in-cluster: KUBERNETES_SERVICE_PORT {port:?} is not a port"
        )));
    }
    let token = dir.join("token");
    // Read once now so a missing mount is reported at start, not at the first request.
    std::fs::read(&token).map_err(|e| {
        ConfigError::in_file(
            &token,
            format!("in-cluster: cannot read service-account token: {e}"),
        )
    })?;
    let ca = dir.join("ca.crt");
    let ca_pem = std::fs::read(&ca).map_err(|e| {
        ConfigError::in_file(&ca, format!("in-cluster: cannot read CA certificate: {e}"))
    })?;
    let mut config = Config::new(format!("https://{host}:{port}"));
    config.tls.ca_pem = Some(ca_pem);
    config.auth = AuthConfig::TokenFile(token);
    config.origin = "in-cluster".to_string();
    Ok(config)
}

//! The server's `/version`: which Kubernetes it is, for the start-up check of the oldest
//! version the controller supports.

use super::rest::{Client, Verb};
use super::Error;

/// What `/version` says (`k8s.io/apimachinery/pkg/version.Info`, the fields read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerVersion {
    /// `gitVersion`, e.g. `v1.31.14` or `v1.31.14-eks-1234`.
    pub git_version: String,
    /// The major version (`major`, e.g. `1`).
    pub major: u32,
    /// The minor version (`minor`, e.g. `31`; managed platforms write `31+`).
    pub minor: u32,
}

impl ServerVersion {
    /// Reads the fields of a `/version` answer; `None` when `major` or `minor` has no number.
    pub fn from_json(v: &serde_json::Value) -> Option<ServerVersion> {
        // Leading digits: GKE and EKS answer `"minor": "31+"`.
        let number = |key: &str| -> Option<u32> {
            let s = v.get(key)?.as_str()?;
            let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        };
        Some(ServerVersion {
            git_version: v
                .get("gitVersion")
                .and_then(|g| g.as_str())
                .unwrap_or_default()
                .to_string(),
            major: number("major")?,
            minor: number("minor")?,
        })
    }
}

impl Client {
    /// The server's Kubernetes version (`GET /version`).
    pub fn server_version(&self) -> Result<ServerVersion, Error> {
        let body = self.send(Verb::Get, "/version", None)?;
        let v: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| Error::Decode(format!("/version: {e}")))?;
        ServerVersion::from_json(&v)
            .ok_or_else(|| Error::Decode(format!("/version names no major and minor version: {v}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn managed_platforms_minor_with_a_plus_reads_as_its_number() {
        let v = ServerVersion::from_json(
            &json!({"major": "1", "minor": "31+", "gitVersion": "v1.31.14-eks-1234"}),
        )
        .unwrap();
        assert_eq!((v.major, v.minor), (1, 31));
        assert_eq!(v.git_version, "v1.31.14-eks-1234");
    }

    #[test]
    fn a_version_without_numbers_is_not_read() {
        assert_eq!(
            ServerVersion::from_json(&json!({"major": "", "minor": "31"})),
            None
        );
        assert_eq!(
            ServerVersion::from_json(&json!({"gitVersion": "v1.31.0"})),
            None
        );
    }
}

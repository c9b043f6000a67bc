//! The start-up check of the server's Kubernetes version: a kube-apiserver older than the
//! oldest version autoregister supports is refused at once, naming the version it needs,
//! instead of running on behaviour nothing has proven.

use std::time::Duration;

use autoregister::client::{redact_url, Canceller, Client};

/// The longest the start-up waits for `/version`: a server that does not answer is not
/// judged, and the command goes on to meet it.
pub const ASK_WITHIN: Duration = Duration::from_secs(5);

/// The oldest Kubernetes (major, minor) supported: the oldest line of tests/kube/versions,
/// where the end-to-end suite runs (`make test`); docs/compatibility.md lists them all.
pub const OLDEST_SUPPORTED: (u32, u32) = (1, 31);

/// Asks the server's `/version` once, for at most `within` (and until `cancel` fires: the
/// caller's signal or deadline). Older than [`OLDEST_SUPPORTED`]: the refusal, naming both
/// versions. A server that cannot be asked (down, silent, `/version` forbidden) is not
/// judged: the command meets that server's answers itself, and reports them.
pub fn too_old(client: &Client, cancel: &Canceller, within: Duration) -> Option<String> {
    let asked = client
        .clone()
        .with_canceller(cancel)
        .with_timeout(within)
        .server_version();
    match asked {
        Ok(v) if (v.major, v.minor) < OLDEST_SUPPORTED => {
            Some(refusal(&v.git_version, v.major, v.minor))
        }
        Ok(v) => {
            log::debug!("kube-apiserver {}", v.git_version);
            None
        }
        Err(e) => {
            log::debug!(
                "the version of {} is unknown: {e}",
                redact_url(&client.config().server)
            );
            None
        }
    }
}

/// The refusal of a server at `major.minor` (`git` as it names itself).
fn refusal(git: &str, major: u32, minor: u32) -> String {
    let (m, n) = OLDEST_SUPPORTED;
    let name = if git.is_empty() {
        format!("v{major}.{minor}")
    } else {
        git.to_string()
    };
    format!(
        "kube-apiserver {name} is too old: autoregister needs Kubernetes v{m}.{n} or newer (the oldest version it is tested on; see docs/compatibility.md)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_server_and_the_version_needed() {
        assert_eq!(
            refusal("v1.30.9-gke.1", 1, 30),
            "kube-apiserver v1.30.9-gke.1 is too old: autoregister needs Kubernetes v1.31 or newer (the oldest version it is tested on; see docs/compatibility.md)"
        );
        assert!(refusal("", 1, 20).starts_with("kube-apiserver v1.20 is too old"));
    }
}

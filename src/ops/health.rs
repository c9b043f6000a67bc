//! Readiness and liveness: named checks, all of which must pass, and the `/readyz` and
//! `/healthz` answers built from them.

use std::fmt::Write as _;
use std::sync::Arc;

/// A readiness check: `Ok` when ready, else why not. Called on every `/readyz` request, from
/// the server's connection thread, so it must be quick and must not panic.
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The outcome of running every check: overall readiness and the body to send.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Readiness {
    /// Whether every check passed.
    pub ready: bool,
    /// `ok`, or one line per check as Kubernetes prints them (`[+]name ok`, `[-]name failed: why`).
    pub body: String,
}

/// Runs `checks` in order; failures are always listed, passes only when `verbose`.
pub(crate) fn readiness(checks: &[(String, ReadyCheck)], verbose: bool) -> Readiness {
    report(checks, verbose, "readyz")
}

/// [`readiness`] for the liveness checks, answered at `/livez` and (older name) `/healthz`;
/// `endpoint` names which in the verbose report.
pub(crate) fn liveness(
    checks: &[(String, ReadyCheck)],
    verbose: bool,
    endpoint: &str,
) -> Readiness {
    report(checks, verbose, endpoint)
}

fn report(checks: &[(String, ReadyCheck)], verbose: bool, endpoint: &str) -> Readiness {
    let results: Vec<(&str, Result<(), String>)> = checks
        .iter()
        .map(|(name, check)| (name.as_str(), check()))
        .collect();
    let ready = results.iter().all(|(_, r)| r.is_ok());
    if ready && !verbose {
        return Readiness {
            ready,
            body: "ok\n".into(),
        };
    }
    let mut body = String::new();
    for (name, r) in &results {
        match r {
            Ok(()) => {
                let _ = writeln!(body, "[+]{name} ok");
            }
            Err(why) => {
                // One line per check: a multi-line reason would read as several checks.
                let why = why.replace(['\r', '\n'], " ");
                let _ = writeln!(body, "[-]{name} failed: {why}");
            }
        }
    }
    let outcome = if ready { "passed" } else { "failed" };
    let _ = writeln!(body, "{endpoint} check {outcome}");
    Readiness { ready, body }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(r: Result<(), &'static str>) -> ReadyCheck {
        Arc::new(move || r.map_err(String::from))
    }

    #[test]
    fn no_checks_is_ready() {
        let r = readiness(&[], false);
        assert!(r.ready);
        assert_eq!(r.body, "ok\n");
    }

    #[test]
    fn every_failure_is_named_with_its_reason() {
        let checks = vec![
            ("synced".to_string(), check(Err("cache not synced"))),
            ("leader".to_string(), check(Ok(()))),
            ("other".to_string(), check(Err("line1\nline2"))),
        ];
        let r = readiness(&checks, false);
        assert!(!r.ready);
        assert_eq!(
            r.body,
            "[-]synced failed: cache not synced\n[+]leader ok\n[-]other failed: line1 line2\nreadyz check failed\n"
        );
    }

    #[test]
    fn verbose_lists_passing_checks() {
        let checks = vec![("synced".to_string(), check(Ok(())))];
        let r = readiness(&checks, true);
        assert!(r.ready);
        assert_eq!(r.body, "[+]synced ok\nreadyz check passed\n");
    }
}

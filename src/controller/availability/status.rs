//! An APIService's availability, as kube-aggregator reports it in `status.conditions`.

use std::fmt;

use crate::api::APIService;
use crate::diagnosis::Cause;

/// What the `Available` condition says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// `Available=True` (reason e.g. `Passed`, `Local`).
    Available {
        /// The condition's reason.
        reason: String,
    },
    /// `Available=False`: the aggregator cannot reach or use the backend.
    Unavailable {
        /// `ServiceNotFound`, `EndpointsNotFound`, `MissingEndpoints`, `FailedDiscoveryCheck`, ...
        reason: String,
        /// The aggregator's message.
        message: String,
    },
    /// No condition yet, or `Unknown`.
    Unknown,
}

impl Observed {
    /// The `Available` condition of `obj`.
    pub fn of(obj: &APIService) -> Observed {
        let condition = obj
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Available"));
        let Some(c) = condition else {
            return Observed::Unknown;
        };
        let reason = c.reason.clone().unwrap_or_default();
        match c.status.as_str() {
            "True" => Observed::Available { reason },
            "False" => Observed::Unavailable {
                reason,
                message: c.message.clone().unwrap_or_default(),
            },
            _ => Observed::Unknown,
        }
    }

    /// Whether the condition is `True`.
    pub fn is_available(&self) -> bool {
        matches!(self, Observed::Available { .. })
    }

    /// Whether the condition is `False`.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Observed::Unavailable { .. })
    }

    /// The value of the `available` gauge: 1, 0, or none while unknown.
    pub fn gauge(&self) -> Option<u8> {
        match self {
            Observed::Available { .. } => Some(1),
            Observed::Unavailable { .. } => Some(0),
            Observed::Unknown => None,
        }
    }

    /// The cause code `explain` starts from ([`Cause::from_condition`]): what the
    /// condition alone shows.
    pub fn cause(&self) -> Cause {
        match self {
            Observed::Available { reason } => Cause::from_condition("True", reason, ""),
            Observed::Unavailable { reason, message } => {
                Cause::from_condition("False", reason, message)
            }
            Observed::Unknown => Cause::NotChecked,
        }
    }

    /// The condition's reason (`Unknown` when there is no condition).
    pub fn reason(&self) -> &str {
        match self {
            Observed::Available { reason } | Observed::Unavailable { reason, .. } => reason,
            Observed::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Observed::Available { reason } => write!(f, "available ({reason})"),
            Observed::Unavailable { reason, message } if message.is_empty() => {
                write!(f, "unavailable: {reason}; cause {}", self.cause())
            }
            Observed::Unavailable { reason, message } => {
                write!(
                    f,
                    "unavailable: {reason} ({message}); cause {}",
                    self.cause()
                )
            }
            Observed::Unknown => f.write_str("availability unknown"),
        }
    }
}

/// A status whose only condition is `Available` with this status, reason and message.
#[cfg(test)]
pub(crate) fn available_status(
    status: &str,
    reason: &str,
    message: &str,
) -> Box<crate::api::APIServiceStatus> {
    Box::new(crate::api::APIServiceStatus {
        conditions: Some(vec![crate::api::APIServiceCondition {
            type_: "Available".into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            ..Default::default()
        }]),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::APIServiceSpec;

    fn with(status: &str, reason: &str, message: &str) -> APIService {
        let mut o = APIService::new("v1.x.example.com", APIServiceSpec::default());
        o.status = Some(available_status(status, reason, message));
        o
    }

    #[test]
    fn reads_the_available_condition() {
        let o = with(
            "False",
            "ServiceNotFound",
            r#"service/s in "ns" is not present"#,
        );
        assert_eq!(
            Observed::of(&o).to_string(),
            r#"unavailable: ServiceNotFound (service/s in "ns" is not present); cause ServiceNotFound"#
        );
        assert_eq!(Observed::of(&o).cause(), Cause::ServiceNotFound);
        assert_eq!(Observed::of(&o).gauge(), Some(0));
        let o = with("True", "Passed", "all checks passed");
        assert!(Observed::of(&o).is_available());
        assert_eq!(Observed::of(&with("Unknown", "X", "")).gauge(), None);
        let bare = APIService::new("v1.y", APIServiceSpec::default());
        assert_eq!(Observed::of(&bare), Observed::Unknown);
    }
}

//! The pure step of leader election: from the lease as read, when we saw it, who we are and
//! the time, decide whether to create, acquire, renew, wait or concede; and build the record
//! to write. No I/O, every instant explicit, so each rule is tested without a server.
//!
//! Expiry is judged on the local monotonic clock from when the current record was first
//! *observed*, never from the `renewTime` it carries: clocks of different machines disagree,
//! a local interval does not.

use std::time::{Duration, Instant, SystemTime};

use crate::api::time::format_rfc3339_micro;
use crate::api::LeaseSpec;

use super::LeaderConfig;

/// A lease record as last read, and when it was first seen in exactly this form.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The record.
    pub spec: LeaseSpec,
    /// When this record (unchanged since) was first observed.
    pub at: Instant,
}

impl Observed {
    /// The observation after reading `spec` at `now`: the time moves only when the record
    /// changed, because only a changed record proves its holder is alive.
    pub fn after_read(prev: Option<&Observed>, spec: LeaseSpec, now: Instant) -> Observed {
        match prev {
            Some(p) if p.spec == spec => Observed { spec, at: p.at },
            _ => Observed { spec, at: now },
        }
    }

    /// When the record stops protecting its holder: observation plus its `leaseDurationSeconds`
    /// (or `fallback` when the record has none).
    pub fn expires_at(&self, fallback: Duration) -> Instant {
        self.at + self.spec.lease_duration().unwrap_or(fallback)
    }
}

/// What one attempt should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No Lease exists: create one naming us.
    Create,
    /// The lease is free (no holder) or its holder's lease ran out: take it over.
    Acquire,
    /// The lease names us: renew it.
    Renew,
    /// Another holder's lease is valid until `until`: try again later.
    Wait {
        /// The current holder.
        holder: String,
        /// When its lease runs out, unless it renews.
        until: Instant,
    },
    /// We were leading, but the lease now names someone else (or nobody).
    Lost {
        /// The holder now named (empty when the lease was released by someone else).
        holder: String,
    },
}

/// Decides one attempt. `observed` is the lease record last read (`None`: none was ever
/// seen; a record that has since vanished still counts, its holder's term with it);
/// `leading` says whether we currently lead; `fallback` is our lease duration, used when the
/// record carries none.
pub fn decide(
    observed: Option<&Observed>,
    identity: &str,
    leading: bool,
    now: Instant,
    fallback: Duration,
) -> Decision {
    let Some(obs) = observed else {
        return Decision::Create;
    };
    let holder = obs.spec.holder();
    if holder == identity {
        return Decision::Renew;
    }
    if leading {
        // Someone rewrote the lease under us: two leaders must never overlap, so we yield.
        return Decision::Lost {
            holder: holder.to_string(),
        };
    }
    let until = obs.expires_at(fallback);
    if !holder.is_empty() && now < until {
        return Decision::Wait {
            holder: holder.to_string(),
            until,
        };
    }
    Decision::Acquire
}

/// Whether a leader whose last successful renewal started at `last_renew` still leads at
/// `now`. Counting from the *start* of the request is the safe side: others counted their
/// lease duration from a moment after the write.
pub fn still_leading(last_renew: Instant, now: Instant, renew_deadline: Duration) -> bool {
    now < last_renew + renew_deadline
}

/// The record to write for `decision` (`Create`, `Acquire` or `Renew`), starting from the
/// current record so fields we do not model survive. `wall` is the wall-clock time written
/// into `acquireTime`/`renewTime` (informative for humans; expiry never reads them).
pub fn record_for(
    decision: &Decision,
    current: &LeaseSpec,
    identity: &str,
    config: &LeaderConfig,
    wall: SystemTime,
) -> LeaseSpec {
    let stamp = format_rfc3339_micro(wall);
    let mut spec = current.clone();
    spec.holder_identity = Some(identity.to_string());
    spec.lease_duration_seconds = Some(config.lease_duration_seconds());
    spec.renew_time = Some(stamp.clone());
    match decision {
        Decision::Renew => {
            // Same holder: the tenure and the transition count carry on.
            spec.acquire_time.get_or_insert(stamp);
            spec.lease_transitions.get_or_insert(0);
        }
        Decision::Acquire => {
            spec.acquire_time = Some(stamp);
            spec.lease_transitions = Some(current.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        Decision::Create | Decision::Wait { .. } | Decision::Lost { .. } => {
            spec.acquire_time = Some(stamp);
            spec.lease_transitions = Some(0);
        }
    }
    spec
}

/// The record a leader writes when it steps down: no holder and a 1 s duration, so any
/// candidate (ours, or one judging by the duration alone) takes over at once.
pub fn release_record(current: &LeaseSpec, wall: SystemTime) -> LeaseSpec {
    let stamp = format_rfc3339_micro(wall);
    let mut spec = current.clone();
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.acquire_time = Some(stamp.clone());
    spec.renew_time = Some(stamp);
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::UNIX_EPOCH;

    const ME: &str = "me_1";
    const OTHER: &str = "other_2";
    const FALLBACK: Duration = Duration::from_secs(15);

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn held_by(holder: &str, secs: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(secs),
            acquire_time: Some("2024-05-01T10:00:00.000000Z".into()),
            renew_time: Some("2024-05-01T10:00:10.000000Z".into()),
            lease_transitions: Some(4),
            ..Default::default()
        }
    }

    fn config() -> LeaderConfig {
        LeaderConfig::default()
    }

    #[test]
    fn no_lease_means_create() {
        let t0 = Instant::now();
        assert_eq!(decide(None, ME, false, t0, FALLBACK), Decision::Create);
        assert_eq!(decide(None, ME, true, t0, FALLBACK), Decision::Create);
    }

    #[test]
    fn another_holder_is_waited_for_until_duration_after_observation() {
        let t0 = Instant::now();
        let obs = Observed {
            spec: held_by(OTHER, 15),
            at: t0,
        };
        let wait = Decision::Wait {
            holder: OTHER.into(),
            until: t0 + s(15),
        };
        assert_eq!(decide(Some(&obs), ME, false, t0, FALLBACK), wait);
        assert_eq!(
            decide(
                Some(&obs),
                ME,
                false,
                t0 + s(15) - Duration::from_nanos(1),
                FALLBACK
            ),
            wait
        );
        assert_eq!(
            decide(Some(&obs), ME, false, t0 + s(15), FALLBACK),
            Decision::Acquire
        );
    }

    #[test]
    fn expiry_uses_the_records_duration_else_ours() {
        let t0 = Instant::now();
        let short = Observed {
            spec: held_by(OTHER, 3),
            at: t0,
        };
        assert_eq!(
            decide(Some(&short), ME, false, t0 + s(3), FALLBACK),
            Decision::Acquire
        );
        let mut none = held_by(OTHER, 1);
        none.lease_duration_seconds = None;
        let obs = Observed { spec: none, at: t0 };
        assert!(matches!(
            decide(Some(&obs), ME, false, t0 + s(14), FALLBACK),
            Decision::Wait { .. }
        ));
        assert_eq!(
            decide(Some(&obs), ME, false, t0 + s(15), FALLBACK),
            Decision::Acquire
        );
    }

    #[test]
    fn an_old_renew_time_does_not_shorten_the_wait() {
        // The record says it was renewed years ago; we only just saw it, so we wait fully.
        let t0 = Instant::now();
        let mut spec = held_by(OTHER, 15);
        spec.renew_time = Some("2001-01-01T00:00:00.000000Z".into());
        let obs = Observed::after_read(None, spec, t0);
        assert!(matches!(
            decide(Some(&obs), ME, false, t0 + s(14), FALLBACK),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn observation_time_moves_only_when_the_record_changes() {
        let t0 = Instant::now();
        let first = Observed::after_read(None, held_by(OTHER, 15), t0);
        assert_eq!(first.at, t0);
        let same = Observed::after_read(Some(&first), held_by(OTHER, 15), t0 + s(10));
        assert_eq!(same.at, t0, "an unchanged record is no sign of life");
        let mut renewed = held_by(OTHER, 15);
        renewed.renew_time = Some("2024-05-01T10:00:12.000000Z".into());
        let moved = Observed::after_read(Some(&same), renewed, t0 + s(12));
        assert_eq!(moved.at, t0 + s(12));
        assert!(matches!(
            decide(Some(&moved), ME, false, t0 + s(20), FALLBACK),
            Decision::Wait { until, .. } if until == t0 + s(27)
        ));
    }

    #[test]
    fn released_lease_is_acquired_at_once() {
        let t0 = Instant::now();
        let released = release_record(&held_by(OTHER, 15), UNIX_EPOCH);
        let obs = Observed::after_read(None, released, t0);
        assert_eq!(
            decide(Some(&obs), ME, false, t0, FALLBACK),
            Decision::Acquire
        );
        // An absent holder is free too.
        let mut spec = held_by(OTHER, 15);
        spec.holder_identity = None;
        let obs = Observed { spec, at: t0 };
        assert_eq!(
            decide(Some(&obs), ME, false, t0, FALLBACK),
            Decision::Acquire
        );
    }

    #[test]
    fn our_own_record_is_renewed() {
        let t0 = Instant::now();
        let obs = Observed {
            spec: held_by(ME, 15),
            at: t0,
        };
        assert_eq!(decide(Some(&obs), ME, true, t0, FALLBACK), Decision::Renew);
        // Even when we do not think we lead (e.g. a write whose answer we missed).
        assert_eq!(
            decide(Some(&obs), ME, false, t0 + s(100), FALLBACK),
            Decision::Renew
        );
    }

    #[test]
    fn a_leader_that_sees_another_holder_has_lost() {
        let t0 = Instant::now();
        let obs = Observed {
            spec: held_by(OTHER, 15),
            at: t0,
        };
        assert_eq!(
            decide(Some(&obs), ME, true, t0, FALLBACK),
            Decision::Lost {
                holder: OTHER.into()
            }
        );
        let released = Observed {
            spec: release_record(&held_by(OTHER, 15), UNIX_EPOCH),
            at: t0,
        };
        assert_eq!(
            decide(Some(&released), ME, true, t0, FALLBACK),
            Decision::Lost { holder: "".into() }
        );
    }

    #[test]
    fn leadership_ends_at_the_renew_deadline_from_the_last_renewal() {
        let t0 = Instant::now();
        assert!(still_leading(t0, t0, s(10)));
        assert!(still_leading(
            t0,
            t0 + s(10) - Duration::from_nanos(1),
            s(10)
        ));
        assert!(!still_leading(t0, t0 + s(10), s(10)));
    }

    fn wall() -> SystemTime {
        UNIX_EPOCH + Duration::new(1_714_557_630, 123_456_789) // 2024-05-01T10:00:30.123456Z
    }

    #[test]
    fn create_record_names_us_with_zero_transitions() {
        let spec = record_for(
            &Decision::Create,
            &LeaseSpec::default(),
            ME,
            &config(),
            wall(),
        );
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({
                "holderIdentity": ME,
                "leaseDurationSeconds": 15,
                "acquireTime": "2024-05-01T10:00:30.123456Z",
                "renewTime": "2024-05-01T10:00:30.123456Z",
                "leaseTransitions": 0
            })
        );
    }

    #[test]
    fn acquiring_counts_a_transition_and_keeps_unknown_fields() {
        let mut current = held_by(OTHER, 15);
        current.extra.insert("strategy".into(), json!("Future"));
        let spec = record_for(&Decision::Acquire, &current, ME, &config(), wall());
        assert_eq!(spec.holder(), ME);
        assert_eq!(spec.lease_transitions, Some(5));
        assert_eq!(
            spec.acquire_time.as_deref(),
            Some("2024-05-01T10:00:30.123456Z")
        );
        assert_eq!(
            spec.renew_time.as_deref(),
            Some("2024-05-01T10:00:30.123456Z")
        );
        assert_eq!(spec.extra.get("strategy"), Some(&json!("Future")));
        // A released lease (empty holder) is still a takeover.
        let released = release_record(&current, UNIX_EPOCH);
        let spec = record_for(&Decision::Acquire, &released, ME, &config(), wall());
        assert_eq!(spec.lease_transitions, Some(5));
    }

    #[test]
    fn renewing_keeps_acquire_time_and_transitions() {
        let current = held_by(ME, 15);
        let spec = record_for(&Decision::Renew, &current, ME, &config(), wall());
        assert_eq!(spec.acquire_time, current.acquire_time);
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(
            spec.renew_time.as_deref(),
            Some("2024-05-01T10:00:30.123456Z")
        );
        assert_eq!(spec.lease_duration_seconds, Some(15));
    }

    #[test]
    fn release_writes_no_holder_and_one_second() {
        let spec = release_record(&held_by(ME, 15), wall());
        assert_eq!(spec.holder_identity.as_deref(), Some(""));
        assert_eq!(spec.lease_duration_seconds, Some(1));
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(
            spec.renew_time.as_deref(),
            Some("2024-05-01T10:00:30.123456Z")
        );
    }
}

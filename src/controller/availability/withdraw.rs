//! When an unavailable APIService of ours is withdrawn, and when it may come back.
//!
//! Pure bookkeeping on instants the caller passes in: what the decision needs to know about a
//! name (keep it, withdraw it now, hold it withdrawn) and when to look again.

use std::time::{Duration, Instant};

use crate::controller::decision::{Desired, SyncMode, Withdrawal};
use crate::runtime::duration;

/// The per-object annotation: `DUR` (withdraw after that long unavailable) or `never`.
pub const ANNOTATION: &str = "autoregister.dev/withdraw-unavailable-after";

/// Longest a registration withdrawn again and again is held before the next try.
pub const MAX_HOLD: Duration = Duration::from_secs(3600);

/// Whether, and after how long unavailable, a desired name is withdrawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Never withdrawn.
    Off,
    /// Withdrawn after this long `Available=False`.
    After(Duration),
}

/// The policy for `desired` under the global `--withdraw-unavailable`: the annotation wins;
/// local APIServices (no `spec.service`) and onstart objects are never withdrawn. A bad
/// annotation is an error (the caller keeps the name registered: withdrawal is opt-in).
pub fn policy(desired: &Desired, global: Option<Duration>) -> Result<Policy, String> {
    if desired.mode == SyncMode::OnStart || desired.object.spec.service.is_none() {
        return Ok(Policy::Off);
    }
    let annotation = desired
        .object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION));
    match annotation.map(str::trim) {
        Some("never") => Ok(Policy::Off),
        Some(text) => match duration::parse(text) {
            Ok(d) if !d.is_zero() => Ok(Policy::After(d)),
            Ok(_) => Err(format!(
                "annotation {ANNOTATION}: 0 is not a duration to wait (use never to opt out)"
            )),
            Err(e) => Err(format!("annotation {ANNOTATION}: {e}")),
        },
        None => Ok(global.map_or(Policy::Off, Policy::After)),
    }
}

/// What is remembered about one name with withdrawal on.
#[derive(Clone, Debug, Default)]
pub struct Record {
    /// Since when our object has been `Available=False` (none: available, unknown or absent).
    pub unavailable_since: Option<Instant>,
    /// Held withdrawn since then, not to be restored before `hold` has passed.
    pub withdrawn: Option<(Instant, Duration)>,
    /// Withdrawals in a row without the registration becoming available in between.
    pub strikes: u32,
    /// Restored by us and not available since: a withdrawal now is a strike.
    pub unproven: bool,
}

impl Record {
    /// The object is (or is not) `Available=False` as of `now`.
    pub fn observe(&mut self, unavailable: bool, available: bool, now: Instant) {
        if unavailable {
            self.unavailable_since.get_or_insert(now);
        } else {
            self.unavailable_since = None;
        }
        if available {
            self.strikes = 0;
            self.unproven = false;
        }
    }

    /// What the decision should do, given the policy and whether the backend looks ready,
    /// and when to look again (a timer, for what no watch event announces).
    pub fn fact(
        &self,
        policy: Policy,
        backend_ready: bool,
        now: Instant,
    ) -> (Withdrawal, Option<Instant>) {
        let Policy::After(after) = policy else {
            return (Withdrawal::Keep, None);
        };
        if let Some((at, hold)) = self.withdrawn {
            let until = at + hold;
            return match (backend_ready, now >= until) {
                (true, true) => (Withdrawal::Keep, None),
                (true, false) => (Withdrawal::Held, Some(until)),
                // The backend's watch brings the name back when it changes.
                (false, _) => (Withdrawal::Held, None),
            };
        }
        match self.unavailable_since {
            Some(since) if now >= since + after => (Withdrawal::Due, None),
            Some(since) => (Withdrawal::Keep, Some(since + after)),
            None => (Withdrawal::Keep, None),
        }
    }

    /// The registration was deleted by a withdrawal at `now`; returns how long it is held
    /// at least (zero the first time: then only the backend's readiness counts).
    pub fn withdraw(&mut self, after: Duration, now: Instant) -> Duration {
        if self.unproven {
            self.strikes = self.strikes.saturating_add(1);
        }
        let hold = match self.strikes {
            0 => Duration::ZERO,
            n => after
                .checked_mul(1u32.checked_shl(n - 1).unwrap_or(u32::MAX))
                .unwrap_or(MAX_HOLD)
                .min(MAX_HOLD),
        };
        self.withdrawn = Some((now, hold));
        self.unavailable_since = None;
        self.unproven = false;
        hold
    }

    /// The registration was created again.
    pub fn restore(&mut self) {
        self.withdrawn = None;
        self.unproven = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{APIService, APIServiceSpec, ServiceReference};

    fn desired(mode: SyncMode, service: bool, annotation: Option<&str>) -> Desired {
        let mut o = APIService::new(
            "v1.x.example.com",
            APIServiceSpec {
                service: service.then(|| ServiceReference {
                    namespace: "ns".into(),
                    name: "svc".into(),
                    port: Some(443),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        if let Some(a) = annotation {
            o.metadata.annotations = Some(
                [(ANNOTATION.to_string(), a.to_string())]
                    .into_iter()
                    .collect(),
            );
        }
        Desired::new(&o, mode)
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn policy_is_opt_in_and_the_annotation_wins() {
        let always = |a| desired(SyncMode::Always, true, a);
        assert_eq!(
            policy(&always(None), None),
            Ok(Policy::Off),
            "off by default"
        );
        assert_eq!(policy(&always(None), Some(S)), Ok(Policy::After(S)));
        assert_eq!(policy(&always(Some("never")), Some(S)), Ok(Policy::Off));
        assert_eq!(
            policy(&always(Some("2m")), None),
            Ok(Policy::After(Duration::from_secs(120)))
        );
        assert!(policy(&always(Some("soon")), Some(S)).is_err());
        assert!(policy(&always(Some("0s")), Some(S)).is_err());
        let local = desired(SyncMode::Always, false, Some("1s"));
        assert_eq!(policy(&local, Some(S)), Ok(Policy::Off), "local: never");
        let onstart = desired(SyncMode::OnStart, true, Some("1s"));
        assert_eq!(policy(&onstart, Some(S)), Ok(Policy::Off), "onstart: never");
    }

    #[test]
    fn withdrawn_after_the_duration_and_held_until_the_backend_is_ready() {
        let t0 = Instant::now();
        let p = Policy::After(S);
        let mut r = Record::default();
        r.observe(true, false, t0);
        assert_eq!(r.fact(p, false, t0), (Withdrawal::Keep, Some(t0 + S)));
        assert_eq!(r.fact(Policy::Off, false, t0 + S), (Withdrawal::Keep, None));
        assert_eq!(r.fact(p, false, t0 + S).0, Withdrawal::Due);
        assert_eq!(r.withdraw(S, t0 + S), Duration::ZERO, "first: no hold");
        assert_eq!(r.fact(p, false, t0 + S * 5), (Withdrawal::Held, None));
        assert_eq!(
            r.fact(p, true, t0 + S).0,
            Withdrawal::Keep,
            "ready: restore"
        );
        r.restore();
        // Back and still unavailable: each withdrawal in a row doubles the hold.
        let mut now = t0 + S * 2;
        for want in [1, 2, 4, 8] {
            r.observe(true, false, now);
            now += S;
            assert_eq!(r.fact(p, true, now).0, Withdrawal::Due);
            let hold = r.withdraw(S, now);
            assert_eq!(hold, S * want);
            assert_eq!(r.fact(p, true, now), (Withdrawal::Held, Some(now + hold)));
            now += hold;
            assert_eq!(r.fact(p, true, now).0, Withdrawal::Keep);
            r.restore();
        }
        // Available once: the backoff starts over.
        r.observe(false, true, now);
        r.observe(true, false, now);
        assert_eq!(r.withdraw(S, now + S), Duration::ZERO);
    }

    #[test]
    fn the_hold_is_capped_at_an_hour() {
        let mut r = Record {
            strikes: 40,
            unproven: true,
            ..Default::default()
        };
        assert_eq!(
            r.withdraw(Duration::from_secs(60), Instant::now()),
            MAX_HOLD
        );
    }
}

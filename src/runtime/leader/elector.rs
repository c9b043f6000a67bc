//! The elector thread: tries to acquire the Lease every retry period (jittered), renews it
//! while leading, concedes when it cannot renew within the renew deadline, and releases it
//! on request.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::unbounded;
use log::{debug, info, warn};

use crate::api::{Lease, LeaseSpec};
use crate::client::{Api, Error};
use crate::runtime::backoff::jittered;
use crate::runtime::clock::{deadline_after, Clock, RealClock};
use crate::runtime::prng::XorShift64;

use super::decide::{decide, record_for, release_record, still_leading, Decision, Observed};
use super::handle::{Shared, StopMode};
use super::{LeaderCallbacks, LeaderConfig, LeaderHandle, ACQUIRE_JITTER};

/// Shortest timeout given to a request squeezed by the renew deadline.
const MIN_SQUEEZED_TIMEOUT: Duration = Duration::from_millis(10);

/// Starts leader election for one Lease.
#[derive(Debug)]
pub struct LeaderElector;

impl LeaderElector {
    /// Starts competing for the Lease `name` reached through `api` (which fixes the namespace)
    /// as `identity`, on a thread of its own. Fails when `config` breaks its invariants
    /// (see [`LeaderConfig::validate`]) or the thread cannot be spawned.
    pub fn start(
        api: Api<Lease>,
        name: &str,
        identity: String,
        config: LeaderConfig,
        callbacks: LeaderCallbacks,
    ) -> std::io::Result<LeaderHandle> {
        config
            .validate()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        if name.is_empty() || identity.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "leader election: lease name and identity must not be empty",
            ));
        }
        let (lost_tx, lost_rx) = unbounded();
        let shared = Arc::new(Shared::new(identity.clone(), lost_tx));
        // Named as kubectl names it everywhere in the log: NAMESPACE/NAME.
        let label = match api.namespace() {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        };
        let run = Run {
            attempts: api.clone().with_canceller(&shared.cancel),
            api,
            name: name.to_string(),
            label,
            identity,
            config,
            callbacks,
            shared: shared.clone(),
            lease: None,
            observed: None,
            last_renew: None,
            lost: false,
            rng: XorShift64::from_entropy(),
        };
        let thread = std::thread::Builder::new()
            .name("leader-election".into())
            .spawn(move || run.run())?;
        Ok(LeaderHandle::new(shared, lost_rx, thread))
    }
}

/// The elector's own state, owned by its thread.
struct Run {
    /// For the release: not cancelled by a stop.
    api: Api<Lease>,
    /// For acquire and renew: a stop cancels what is in flight.
    attempts: Api<Lease>,
    name: String,
    /// `NAMESPACE/NAME`, for log lines.
    label: String,
    identity: String,
    config: LeaderConfig,
    callbacks: LeaderCallbacks,
    shared: Arc<Shared>,
    /// The Lease as last read or written (its resourceVersion makes our writes conditional).
    lease: Option<Lease>,
    /// The record as last observed, and since when (kept when the Lease vanishes; `None`
    /// until one is seen).
    observed: Option<Observed>,
    /// While leading: when the last successful renewal (or acquisition) started.
    last_renew: Option<Instant>,
    /// Leadership was lost; we no longer compete and only wait to be stopped.
    lost: bool,
    rng: XorShift64,
}

/// How one attempt ended.
enum Outcome {
    /// We hold the lease, freshly written by a request sent at this instant.
    Holding(Instant),
    /// Someone else holds it, or a race was lost; try again later.
    NotHolding,
    /// We were leading and someone else holds it now.
    Taken(String),
}

impl Run {
    fn run(mut self) {
        let clock = RealClock;
        loop {
            if let Some(mode) = self.shared.stop_requested() {
                self.finish(mode);
                return;
            }
            let next = if self.lost {
                None
            } else {
                self.step(Instant::now())
            };
            if self.shared.stop_requested().is_some() {
                continue;
            }
            clock.wait(&self.shared.wakeup, next);
        }
    }

    /// One attempt and its consequences; answers when to try next.
    fn step(&mut self, start: Instant) -> Option<Instant> {
        if let Some(last) = self.last_renew {
            if !still_leading(last, start, self.config.renew_deadline) {
                self.lose("could not renew the lease within the renew deadline");
                return None;
            }
        }
        match self.attempt() {
            // Counted from when the write was sent, the safe side: others count their lease
            // duration from a moment after the write.
            Ok(Outcome::Holding(sent)) => {
                let first = self.last_renew.is_none();
                self.last_renew = Some(sent);
                if first {
                    info!(
                        "leader election: leading as {} (acquired lease {})",
                        self.identity, self.label
                    );
                }
                let until = deadline_after(sent, self.config.renew_deadline);
                self.shared.update(|s| s.leading_until = Some(until));
                if first {
                    self.callbacks.started();
                }
            }
            Ok(Outcome::NotHolding) => {}
            Ok(Outcome::Taken(holder)) => {
                self.lose(&format!("the lease is now held by {holder:?}"));
                return None;
            }
            // A stop cancelled the request: `run` sees the stop next.
            Err(e) if e.is_cancelled() => {}
            Err(e) => warn!(
                "leader election: cannot {} lease {}: {e}",
                if self.last_renew.is_some() {
                    "renew"
                } else {
                    "acquire"
                },
                self.label
            ),
        }
        let now = Instant::now();
        Some(match self.last_renew {
            // Renew on the period without jitter, and wake at the deadline at the latest so
            // a loss is noticed on time.
            Some(last) => deadline_after(now, self.config.retry_period)
                .min(deadline_after(last, self.config.renew_deadline)),
            None => deadline_after(
                now,
                jittered(
                    self.config.retry_period,
                    ACQUIRE_JITTER,
                    self.rng.next_f64(),
                ),
            ),
        })
    }

    /// Reads (unless renewing from what we wrote), decides and writes.
    fn attempt(&mut self) -> Result<Outcome, Error> {
        let leading = self.last_renew.is_some();
        // Fast path: a leader renews from the object it wrote, without a read. A conflict
        // means the object changed under us: read it and decide.
        if let (true, Some(lease)) = (leading, &self.lease) {
            let mut next = lease.clone();
            next.spec = self.record(&Decision::Renew, &lease.spec);
            let sent = Instant::now();
            match self.timed_api(sent).update(&next) {
                Ok(written) => return Ok(self.wrote(written, sent)),
                // Changed or gone under us (a server that lost its data has no Lease): read
                // it and decide.
                Err(e) if e.is_conflict() || e.is_not_found() => {
                    debug!(
                        "leader election: renewal of {} failed ({e}); re-reading",
                        self.label
                    )
                }
                Err(e) => return Err(e),
            }
        }
        match self.timed_api(Instant::now()).get(&self.name) {
            Ok(lease) => {
                let observed = Observed::after_read(
                    self.observed.as_ref(),
                    lease.spec.clone(),
                    Instant::now(),
                );
                self.saw_holder(observed.spec.holder());
                self.observed = Some(observed);
                self.lease = Some(lease);
            }
            // The record last observed stays: a Lease that vanished (an API server that
            // lost its data, an admin's delete) does not end its holder's term, which may
            // still lead until its renew deadline. So a candidate waits that term out as if
            // the record were there, and a leader writes its record anew.
            Err(e) if e.is_not_found() => self.lease = None,
            Err(e) => return Err(e),
        }
        let decision = decide(
            self.observed.as_ref(),
            &self.identity,
            leading,
            Instant::now(),
            self.config.lease_duration,
        );
        match (decision, self.lease.clone()) {
            (Decision::Create, _) | (Decision::Acquire | Decision::Renew, None) => {
                let spec = self.record(&Decision::Create, &LeaseSpec::default());
                let sent = Instant::now();
                match self
                    .timed_api(sent)
                    .create(&Lease::new(self.name.clone(), spec))
                {
                    Ok(written) => Ok(self.wrote(written, sent)),
                    // Another candidate created it first; read it next time.
                    Err(e) if e.is_already_exists() || e.is_conflict() => Ok(Outcome::NotHolding),
                    Err(e) => Err(e),
                }
            }
            (decision @ (Decision::Acquire | Decision::Renew), Some(mut next)) => {
                next.spec = self.record(&decision, &next.spec);
                let sent = Instant::now();
                match self.timed_api(sent).update(&next) {
                    Ok(written) => Ok(self.wrote(written, sent)),
                    // A normal race: someone wrote between our read and our write.
                    Err(e) if e.is_conflict() => Ok(Outcome::NotHolding),
                    Err(e) => Err(e),
                }
            }
            (Decision::Wait { holder, until }, _) => {
                debug!(
                    "leader election: lease {} held by {holder}; free in {} unless renewed",
                    self.label,
                    crate::text::duration(until.saturating_duration_since(Instant::now()))
                );
                Ok(Outcome::NotHolding)
            }
            (Decision::Lost { holder }, _) => Ok(Outcome::Taken(holder)),
        }
    }

    /// Records a successful write of ours.
    fn wrote(&mut self, written: Lease, sent: Instant) -> Outcome {
        self.saw_holder(written.spec.holder());
        self.observed = Some(Observed {
            spec: written.spec.clone(),
            at: Instant::now(),
        });
        self.lease = Some(written);
        Outcome::Holding(sent)
    }

    fn record(&self, decision: &Decision, current: &LeaseSpec) -> LeaseSpec {
        record_for(
            decision,
            current,
            &self.identity,
            &self.config,
            SystemTime::now(),
        )
    }

    /// The API for a request sent at `now`, with a timeout that never carries a leader past
    /// its renew deadline.
    fn timed_api(&self, now: Instant) -> Api<Lease> {
        let mut timeout = self.config.request_timeout();
        if let Some(last) = self.last_renew {
            let left =
                deadline_after(last, self.config.renew_deadline).saturating_duration_since(now);
            timeout = timeout.min(left.max(MIN_SQUEEZED_TIMEOUT));
        }
        self.attempts.clone().with_timeout(timeout)
    }

    /// Publishes the observed holder and reports a change of leader.
    fn saw_holder(&self, holder: &str) {
        let holder = (!holder.is_empty()).then(|| holder.to_string());
        let changed = self.shared.update(|s| {
            let changed = s.leader != holder;
            s.leader = holder.clone();
            changed
        });
        if let (true, Some(h)) = (changed, holder) {
            // Our own holding is logged once, as "leading as" when acquired.
            if h != self.identity {
                info!("leader election: lease {} is held by {h}", self.label);
            }
            self.callbacks.new_leader(&h);
        }
    }

    /// Leadership ended against our will: stop leading first, then tell.
    fn lose(&mut self, why: &str) {
        self.last_renew = None;
        self.lost = true;
        self.shared.update(|s| s.leading_until = None);
        warn!(
            "leader election: {} lost lease {}: {why}",
            self.identity, self.label
        );
        self.callbacks.stopped();
        // After the hook, so a listener knows it has run. The receiver lives in the handle;
        // a send error only means nobody listens.
        let _ = self.shared.lost_tx.send(());
    }

    /// Stops: leadership ends before the release is written, so no moment has two leaders.
    fn finish(mut self, mode: StopMode) {
        let was_leading = self.last_renew.take().is_some();
        self.shared.update(|s| s.leading_until = None);
        if mode == StopMode::Release {
            self.release();
        }
        if was_leading {
            info!(
                "leader election: {} stopped leading lease {}",
                self.identity, self.label
            );
            self.callbacks.stopped();
        }
        self.shared.update(|s| s.finished = true);
    }

    /// Writes the release record if the last record we saw names us; one retry after a
    /// conflict (e.g. a renewal whose answer we missed moved the resourceVersion).
    fn release(&mut self) {
        let api = self
            .api
            .clone()
            .with_timeout(self.config.request_timeout().min(super::RELEASE_TIMEOUT));
        for _ in 0..2 {
            let Some(lease) = self
                .lease
                .as_ref()
                .filter(|l| l.spec.holder() == self.identity)
            else {
                return;
            };
            let mut next = lease.clone();
            next.spec = release_record(&lease.spec, SystemTime::now());
            match api.update(&next) {
                Ok(written) => {
                    info!(
                        "leader election: {} released lease {}",
                        self.identity, self.label
                    );
                    self.lease = Some(written);
                    return;
                }
                Err(e) if e.is_conflict() => match api.get(&self.name) {
                    Ok(current) => self.lease = Some(current),
                    Err(e) => {
                        warn!("leader election: cannot release lease {}: {e}", self.label);
                        return;
                    }
                },
                Err(e) => {
                    warn!("leader election: cannot release lease {}: {e}", self.label);
                    return;
                }
            }
        }
    }
}

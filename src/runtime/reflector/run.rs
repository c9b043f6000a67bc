//! The reflector thread's loop: list, watch, re-watch, relist, back off.
//!
//! Relists come from four places: a 410 (at once, not a failure), a failed watch other
//! than a 429 (after the backoff: the server we come back to may have restarted empty or
//! been restored), a resourceVersion that went backwards or "too large" (a restore), and the
//! periodic relist that catches whatever nothing else noticed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::client::{Error, WatchParams};
use crate::runtime::backoff::{jittered, Backoff};
use crate::runtime::clock::deadline_after;
use crate::runtime::prng::XorShift64;
use crate::runtime::timers::Task;

use super::kind::{Kind, Step};
use super::watch::{classify, Failure, WatchEnd};
use super::{ReflectorOptions, Shutdown};

/// A watch that ends sooner than this without a single event is suspicious: a proxy or
/// a broken server closing at once; back off rather than spin.
const SUSPICIOUS_WATCH: Duration = Duration::from_secs(1);

/// Longest a full list (every page, and a failure's backoff after it) may take before the
/// reflector counts as stuck on `/healthz`.
const LIST_BOUND: Duration = Duration::from_secs(300);

/// Beyond the watch's own timeout, how long a watch step may take (head, backoff).
const WATCH_SLACK_BOUND: Duration = Duration::from_secs(120);

/// What the loop does next.
enum Next {
    /// A full list, replacing the cache.
    List,
    /// A watch from this resourceVersion.
    Watch(String),
}

/// The reflector thread's state; the kind is behind [`Kind`], so this is compiled once.
pub(super) struct Runner {
    /// The kind's plural, for log lines.
    plural: &'static str,
    kind: Arc<dyn Kind>,
    opts: ReflectorOptions,
    shutdown: Arc<Shutdown>,
    deliver: Arc<Mutex<()>>,
    backoff: Backoff,
    rng: XorShift64,
    /// The last resourceVersion seen from a list, an object or a bookmark.
    last_rv: String,
    /// What is failing now (`list`, `watch`), so it is logged once, not per retry.
    failing: Option<&'static str>,
    /// A watch was answered "too large resource version": the next relist must not trust
    /// cached resourceVersions, even if the server has since counted past ours again.
    history_moved_back: bool,
    /// When the last full list completed: the periodic relist is due `relist` after it.
    listed: Option<Instant>,
    /// Set by a list, taken by the first watch after it: when and at which version it
    /// listed, to tell a 410 that came suspiciously soon after it.
    fresh: Option<(Instant, String)>,
}

impl Runner {
    pub(super) fn new(
        plural: &'static str,
        kind: Arc<dyn Kind>,
        opts: ReflectorOptions,
        shutdown: Arc<Shutdown>,
        deliver: Arc<Mutex<()>>,
    ) -> Self {
        Runner {
            plural,
            kind,
            backoff: Backoff::new(opts.backoff.clone()),
            opts,
            shutdown,
            deliver,
            rng: XorShift64::from_entropy(),
            last_rv: String::new(),
            failing: None,
            history_moved_back: false,
            listed: None,
            fresh: None,
        }
    }

    /// Runs until stopped.
    pub(super) fn run(mut self) {
        let heartbeat = self.opts.liveness.as_ref().map(|l| l.register("reflector"));
        let watch_bound = self
            .opts
            .max_watch_timeout
            .saturating_add(WATCH_SLACK_BOUND);
        let mut next = Next::List;
        while !self.shutdown.is_stopped() {
            let step = match next {
                Next::List => {
                    if let Some(h) = &heartbeat {
                        h.busy_for(LIST_BOUND, "list");
                    }
                    self.list()
                }
                Next::Watch(rv) => {
                    if let Some(h) = &heartbeat {
                        h.busy_for(watch_bound, "watch");
                    }
                    self.watch(rv)
                }
            };
            match step {
                Some(n) => next = n,
                None => break,
            }
        }
        if let Some(h) = heartbeat {
            h.retire();
        }
        log::debug!("reflector for {} stopped", self.plural);
    }

    /// One full list; answers what to do next, or `None` when stopped.
    fn list(&mut self) -> Option<Next> {
        let cancel = self.shutdown.register_request()?;
        let (plural, last_rv, moved_back) = (self.plural, &self.last_rv, self.history_moved_back);
        let listed = self.kind.relist(
            self.opts.page_size,
            self.opts.label_selector.as_deref(),
            &cancel,
            &self.deliver,
            &mut |listed_rv| {
                let backwards = moved_backwards(listed_rv, last_rv);
                if backwards {
                    log::warn!(
                        "{plural}: the server's history moved backwards (list at resourceVersion {listed_rv}, cache at {last_rv}); replacing the cache",
                    );
                }
                !(backwards || moved_back)
            },
        );
        self.shutdown.unregister_request();
        let listed = match listed {
            Ok(Some(l)) => l,
            Ok(None) => return None,
            Err(e) => return self.fail("list", &e).then_some(Next::List),
        };
        let (n, counts) = (listed.listed, listed.counts);
        self.history_moved_back = false;
        let changed = counts.added + counts.updated + counts.deleted;
        if self.listed.is_some() && changed > 0 {
            // A relist that finds differences means events were missed: worth saying.
            log::info!(
                "{}: relist at resourceVersion {} found {} added, {} updated, {} deleted",
                self.plural,
                listed.resource_version,
                counts.added,
                counts.updated,
                counts.deleted
            );
        } else {
            log::debug!(
                "{}: listed {n} at resourceVersion {}: {counts:?}",
                self.plural,
                listed.resource_version
            );
        }
        let relisted = self.listed.is_some();
        self.listed = Some(Instant::now());
        self.fresh = Some((Instant::now(), listed.resource_version.clone()));
        self.kind.mark_synced();
        self.healthy();
        self.reached();
        if relisted {
            let _turn = self.deliver.lock();
            self.kind.on_relisted();
        }
        self.last_rv = listed.resource_version.clone();
        Some(Next::Watch(listed.resource_version))
    }

    /// One watch from `rv`; answers what to do next, or `None` when stopped.
    fn watch(&mut self, rv: String) -> Option<Next> {
        let mut timeout = self.watch_timeout();
        match self.until_relist() {
            Some(left) if left.is_zero() => return Some(self.periodic_relist()),
            // The watch ends when the relist is due (whole seconds, at least one).
            Some(left) => timeout = timeout.min(ceil_secs(left)),
            None => {}
        }
        let cancel = self.shutdown.register_watch()?;
        let params = WatchParams {
            resource_version: rv.clone(),
            timeout_seconds: timeout,
            allow_bookmarks: true,
            label_selector: self.opts.label_selector.clone(),
            field_selector: None,
            idle_timeout: self.opts.watch_idle_timeout,
        };
        let started = Instant::now();
        // Right after the list it came from, a 410 is the server expiring what it just
        // listed: a broken server, so back off instead of relisting in a tight loop.
        let fresh = self
            .fresh
            .take()
            .is_some_and(|(at, lrv)| lrv == rv && at.elapsed() < SUSPICIOUS_WATCH);
        let mut last_rv = rv.clone();
        let mut seen = 0usize;
        let (kind, deliver, shutdown) = (
            self.kind.clone(),
            self.deliver.clone(),
            self.shutdown.clone(),
        );
        let end = kind.watch(
            &params,
            &cancel,
            &deliver,
            &mut last_rv,
            &|| shutdown.is_stopped(),
            &mut |step| match step {
                Step::Opened => {
                    // The server is reachable: count health from here (a later failure after
                    // two quiet minutes starts the backoff over).
                    self.backoff.success(started);
                    self.reached();
                }
                Step::Event => {
                    seen += 1;
                    if seen == 1 {
                        // Events flow: say "recovered" now, not when the watch ends minutes later.
                        self.healthy();
                    }
                }
            },
        );
        let end = match end {
            Ok(end) => end,
            Err(e) => {
                self.shutdown.unregister_request();
                if self.shutdown.take_probed() {
                    return self.after_probe(rv);
                }
                return self.after_watch_error(&e, rv, fresh);
            }
        };
        self.shutdown.unregister_request();
        self.last_rv.clone_from(&last_rv);
        match end {
            WatchEnd::Stopped => None,
            WatchEnd::Failed(_) if self.shutdown.take_probed() => self.after_probe(last_rv),
            WatchEnd::Failed(e) => self.after_watch_error(&e, last_rv, fresh && seen == 0),
            WatchEnd::Backwards { seen, got } => {
                self.history_moved_back = true;
                log::warn!(
                    "{}: the watch went from resourceVersion {seen} back to {got}: the server's history moved backwards; relisting",
                    self.plural
                );
                Some(Next::List)
            }
            WatchEnd::Closed if seen == 0 && started.elapsed() < SUSPICIOUS_WATCH => {
                let e = Error::Io("the watch closed at once without any event".into());
                self.fail("watch", &e).then_some(Next::Watch(last_rv))
            }
            WatchEnd::Closed => {
                self.healthy();
                if self.until_relist().is_some_and(|left| left.is_zero()) {
                    return Some(self.periodic_relist());
                }
                log::debug!("{}: watch ended; re-watching from {last_rv}", self.plural);
                Some(Next::Watch(last_rv))
            }
        }
    }

    /// What to do after a watch failed to open or broke; `fresh`: it was opened right
    /// after a list, from that list's version, and saw nothing.
    fn after_watch_error(&mut self, e: &Error, rv: String, fresh: bool) -> Option<Next> {
        if self.shutdown.is_stopped() {
            return None;
        }
        match classify(e) {
            Failure::Gone if fresh => self.fail("watch", e).then_some(Next::List),
            Failure::Gone => {
                // Not a failure: history was compacted past us, the normal way a long watch
                // ends on a busy cluster. Relist at once, whatever the backoff has grown to.
                log::info!(
                    "{}: resourceVersion {rv} is gone ({e}); relisting",
                    self.plural
                );
                Some(Next::List)
            }
            Failure::TooLarge => {
                self.history_moved_back = true;
                log::warn!(
                    "{}: the server has not reached resourceVersion {rv} ({e}): its history moved backwards; relisting",
                    self.plural
                );
                self.wait_before_retry(e).then_some(Next::List)
            }
            Failure::Throttled => self.fail("watch", e).then_some(Next::Watch(rv)),
            Failure::Connection | Failure::Other => self.fail("watch", e).then_some(Next::List),
        }
    }

    /// After a probe ended the watch: watch again from `rv` at once (the server was not
    /// at fault; whether it answers is the question the new watch asks).
    fn after_probe(&mut self, rv: String) -> Option<Next> {
        if self.shutdown.is_stopped() {
            return None;
        }
        log::debug!(
            "{}: a request found the server unreachable; re-watching from {rv} to check",
            self.plural
        );
        Some(Next::Watch(rv))
    }

    /// The server answered a list or a watch: open the shared gate.
    fn reached(&self) {
        if let Some(r) = &self.opts.reachability {
            r.regained();
        }
    }

    /// How long until the periodic relist is due; `None` when there is none.
    fn until_relist(&self) -> Option<Duration> {
        let period = self.opts.relist?;
        let at = self.listed?;
        Some(period.saturating_sub(at.elapsed()))
    }

    fn periodic_relist(&self) -> Next {
        log::debug!("{}: periodic relist", self.plural);
        Next::List
    }

    /// Logs a failure once per state change, then waits; false when stopped meanwhile.
    fn fail(&mut self, what: &'static str, e: &Error) -> bool {
        self.shutdown
            .set_failure(Some(format!("{what} failing: {e}")));
        // An unreachable server is reported once, by the gate's subscriber ("the API server
        // cannot be reached …"): one cause, one warning, whichever kind noticed it first.
        let gated = match (&self.opts.reachability, e.is_unreachable()) {
            (Some(r), true) => {
                r.lost(&e.to_string());
                true
            }
            _ => false,
        };
        if self.failing != Some(what) {
            if gated {
                log::debug!(
                    "{}: {what} failing: {e}; retrying with backoff",
                    self.plural
                );
            } else {
                log::warn!(
                    "{}: {what} failing: {e}; retrying with backoff",
                    self.plural
                );
            }
            self.failing = Some(what);
        } else {
            log::debug!("{}: {what} still failing: {e}", self.plural);
        }
        self.wait_before_retry(e)
    }

    /// Waits the next backoff delay (at least the server's Retry-After); false when stopped.
    fn wait_before_retry(&mut self, e: &Error) -> bool {
        let base = self.backoff.failure(Instant::now());
        let mut delay = jittered(base, self.backoff.config().jitter, self.rng.next_f64());
        if let Some(ra) = e.retry_after() {
            delay = delay.max(ra);
        }
        !self.shutdown.sleep(delay)
    }

    fn healthy(&mut self) {
        self.backoff.success(Instant::now());
        if let Some(what) = self.failing.take() {
            self.shutdown.set_failure(None);
            log::info!("{}: {what} recovered", self.plural);
        }
    }

    /// A random `timeoutSeconds` in `[min, max]` watch timeout.
    fn watch_timeout(&mut self) -> u32 {
        let lo = self.opts.min_watch_timeout.as_secs();
        let hi = self.opts.max_watch_timeout.as_secs().max(lo);
        u32::try_from(self.rng.range_inclusive(lo, hi)).unwrap_or(u32::MAX)
    }
}

/// Whether a list's resourceVersion is older than the one the cache already had
/// (only comparable when both are integers, which the API does not promise).
fn moved_backwards(listed: &str, cached: &str) -> bool {
    super::watch::older(listed, cached)
}

/// `d` in whole seconds, rounded up, at least 1 (`timeoutSeconds` is whole seconds; 0 would
/// leave the watch's length to the server).
fn ceil_secs(d: Duration) -> u32 {
    let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    u32::try_from(s.max(1)).unwrap_or(u32::MAX)
}

/// The resync: every `period`, re-delivers every cached object as an update (a task of
/// the reflector's timers).
pub(super) struct Resync {
    pub(super) period: Duration,
    pub(super) kind: Arc<dyn Kind>,
    pub(super) shutdown: Arc<Shutdown>,
    pub(super) deliver: Arc<Mutex<()>>,
}

impl Task for Resync {
    fn fire(&self, now: Instant) -> Option<Instant> {
        if self.shutdown.is_stopped() {
            return None;
        }
        if self.kind.has_synced() {
            // Under the delivery lock: a resync sees the cache between two events, never
            // mid-relist.
            let _turn = self.deliver.lock();
            self.kind.resync();
        }
        Some(deadline_after(now, self.period))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use parking_lot::Mutex;

    use super::moved_backwards;
    use crate::api::{
        APIService, ListMeta, ObjectList, Resource, Status, StatusCause, StatusDetails, WatchEvent,
    };
    use crate::client::{Canceller, Error, ListParams, WatchParams};
    use crate::runtime::backoff::BackoffConfig;
    use crate::runtime::reflector::test_support::{svc, Recorder};
    use crate::runtime::reflector::{ListerWatcher, Reflector, ReflectorOptions, WatchEvents};
    use crate::runtime::store::Store;

    type WatchAnswer = Result<Vec<WatchEvent<APIService>>, Error>;

    /// Answers lists and watches from scripts; once a script runs out, lists fail and
    /// watches end at once.
    struct Scripted {
        lists: Mutex<VecDeque<ObjectList<APIService>>>,
        watches: Mutex<VecDeque<WatchAnswer>>,
    }

    impl ListerWatcher<APIService> for Scripted {
        fn list(&self, _: &ListParams, _: &Canceller) -> Result<ObjectList<APIService>, Error> {
            self.lists
                .lock()
                .pop_front()
                .ok_or_else(|| Error::Io("script over".into()))
        }
        fn watch(&self, _: &WatchParams, _: &Canceller) -> Result<WatchEvents<APIService>, Error> {
            let events = self.watches.lock().pop_front().unwrap_or(Ok(Vec::new()))?;
            Ok(Box::new(events.into_iter().map(Ok)))
        }
    }

    fn with_priority(name: &str, rv: &str, p: i32) -> APIService {
        let mut o = svc(name, rv);
        o.spec.version_priority = p;
        o
    }

    fn list(items: Vec<APIService>, rv: &str) -> ObjectList<APIService> {
        ObjectList {
            api_version: APIService::api_version(),
            kind: "APIServiceList".into(),
            metadata: ListMeta {
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            items,
        }
    }

    #[test]
    fn after_too_large_the_relist_distrusts_versions_even_when_the_server_caught_up() {
        let mut too_large =
            Status::failure(504, "Timeout", "Too large resource version: 3, current: 2");
        too_large.details = Some(StatusDetails {
            causes: vec![StatusCause {
                reason: Some("ResourceVersionTooLarge".into()),
                ..Default::default()
            }],
            ..Default::default()
        });
        let lw = Scripted {
            lists: Mutex::new(VecDeque::from([
                list(vec![with_priority("c", "2", 10)], "2"),
                // The restored server reused version 2 for c's new state and has since
                // counted past the version the reflector had seen (3).
                list(
                    vec![with_priority("c", "2", 20), svc("e", "2"), svc("x", "4")],
                    "4",
                ),
            ])),
            watches: Mutex::new(VecDeque::from([
                Ok(vec![WatchEvent::Added(svc("e", "3"))]),
                Err(Error::api(504, Some(too_large), None)),
            ])),
        };
        let store = Arc::new(Store::new());
        let rec = Arc::new(Recorder::default());
        let opts = ReflectorOptions {
            backoff: BackoffConfig {
                initial: Duration::from_millis(1),
                max: Duration::from_millis(5),
                jitter: 0.0,
                ..Default::default()
            },
            ..Default::default()
        };
        let handle = Reflector::spawn(lw, store.clone(), rec.clone(), opts);
        let deadline = Instant::now() + Duration::from_secs(5);
        while store.get("x").is_none() {
            assert!(Instant::now() < deadline, "no relist: {:?}", rec.0.lock());
            std::thread::sleep(Duration::from_millis(2));
        }
        handle.join();
        let c = store.get("c").map(|c| c.spec.version_priority);
        assert_eq!(c, Some(20), "c's new state replaced the cached one");
        assert_eq!(
            rec.take(),
            [
                "add c@2",
                "add e@3",
                "update c@2->2",
                "update e@3->2",
                "add x@4"
            ]
        );
    }

    #[test]
    fn backwards_only_when_both_are_numbers() {
        assert!(moved_backwards("5", "100"));
        assert!(!moved_backwards("100", "5"));
        assert!(!moved_backwards("100", "100"));
        assert!(!moved_backwards("5", ""));
        assert!(!moved_backwards("abc", "100"));
    }
}

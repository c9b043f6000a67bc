//! Availability of the APIServices we own, and (opt-in) withdrawing the unavailable ones.
//!
//! kube-aggregator writes whether it can reach each APIService's backend to
//! `status.conditions[type=Available]`. This component reads it from the APIService watch
//! (metrics, a log line and an Event on each transition) and, when withdrawal is on for a
//! name (`--withdraw-unavailable`, or the [`withdraw::ANNOTATION`]), answers the decision's
//! [`Withdrawal`] question: a registration unavailable for too long is deleted and held
//! absent until its backend looks ready — watched through the Services and EndpointSlices of
//! the namespaces involved, not polled. While withdrawn, clients of that API get 404 instead
//! of 503, and the cluster's discovery (namespace deletion, kubectl) stays healthy.

mod backends;
pub mod status;
pub mod withdraw;

use std::fmt::Write as _;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::{info, warn};
use parking_lot::Mutex;

use crate::api::APIService;
use crate::client::Client;
use crate::controller::decision::{Desired, Withdrawal};
use crate::controller::events::{EventReason, EventRecorder};
use crate::hash::Map;
use crate::prometheus::escape_label;
use crate::runtime::reflector::ReflectorOptions;
use crate::runtime::workqueue::RateLimitingQueue;
use backends::Backends;
pub use status::Observed;
use withdraw::Record;
pub use withdraw::{Policy, ANNOTATION, MAX_HOLD};

/// What is known about one name.
#[derive(Default)]
struct Entry {
    /// The availability of our cached object (`Unknown` when absent or not ours).
    observed: Option<Observed>,
    /// The last unavailability seen, kept when the object goes (a withdrawal's delete event
    /// may arrive before its answer).
    last_unavailable: Option<Observed>,
    /// Withdrawal bookkeeping.
    record: Record,
    /// Withdrawal is on for the desired name, after this long unavailable.
    after: Option<Duration>,
    /// `namespace/name` of its service, when withdrawal is on.
    service: Option<(String, String)>,
    /// Withdrawals so far.
    withdrawals: u64,
    /// The bad annotation already warned about.
    warned: Option<String>,
    /// Said that a due withdrawal waits for the backend watch.
    warned_unwatched: bool,
}

/// Availability tracking and withdrawal for one controller.
pub struct Availability {
    global: Option<Duration>,
    entries: Mutex<Map<String, Entry>>,
    queue: Arc<RateLimitingQueue<String>>,
    backends: Backends,
    events: EventRecorder,
}

impl Availability {
    /// Tracks availability; withdraws after `global` unavailable (`None`: only where the
    /// annotation asks). Backend watches go through `client`.
    pub(crate) fn new(
        client: Client,
        options: ReflectorOptions,
        queue: Arc<RateLimitingQueue<String>>,
        events: EventRecorder,
        global: Option<Duration>,
    ) -> Arc<Availability> {
        Arc::new_cyclic(|me: &Weak<Availability>| {
            let me = me.clone();
            let on_change = Arc::new(move |ns: &str| {
                if let Some(a) = me.upgrade() {
                    a.backend_changed(ns);
                }
            });
            Availability {
                global,
                entries: Mutex::new(Map::default()),
                queue,
                backends: Backends::new(client, options, on_change),
                events,
            }
        })
    }

    /// A desired entry was set (`Some`) or removed: watch its backend's namespace while
    /// withdrawal is on for it.
    pub(crate) fn track_desired(&self, name: &str, desired: Option<&Desired>) {
        let policy = desired.map(|d| (d, withdraw::policy(d, self.global)));
        let (after, service) = match &policy {
            Some((d, Ok(Policy::After(after)))) => (
                Some(*after),
                d.object
                    .spec
                    .service
                    .as_ref()
                    .map(|s| (s.namespace.to_string(), s.name.to_string())),
            ),
            Some((_, Err(e))) => {
                let mut entries = self.entries.lock();
                let entry = entries.entry(name.to_string()).or_default();
                if entry.warned.as_deref() != Some(e.as_str()) {
                    warn!("{name}: {e}; not withdrawn when unavailable");
                    entry.warned = Some(e.clone());
                }
                (None, None)
            }
            _ => (None, None),
        };
        {
            let mut entries = self.entries.lock();
            if after.is_none() && !entries.contains_key(name) {
                // Nothing to remember (the common case with withdrawal off).
            } else {
                let entry = entries.entry(name.to_string()).or_default();
                entry.after = after;
                entry.service = service.clone();
                if desired.is_none() {
                    entry.record.withdrawn = None;
                }
            }
        }
        self.backends
            .track(name, service.as_ref().map(|(ns, _)| ns.as_str()));
    }

    /// The APIService watch saw `obj` (ours when `ours`); logs and records a transition.
    pub(crate) fn observe(&self, obj: &APIService, ours: bool) {
        let name = obj.metadata.name.as_deref().unwrap_or("");
        if name.is_empty() {
            return;
        }
        if !ours {
            self.observe_gone(name);
            return;
        }
        let now = Observed::of(obj);
        let transition = {
            let mut entries = self.entries.lock();
            if now == Observed::Unknown && !entries.contains_key(name) {
                // No aggregator reports on it (yet): nothing to remember.
                return;
            }
            // No key allocated for a name already there: every watch event of ours passes here.
            if !entries.contains_key(name) {
                entries.insert(name.to_string(), Entry::default());
            }
            let Some(entry) = entries.get_mut(name) else {
                return;
            };
            let before = entry.observed.replace(now.clone());
            if now.is_unavailable() {
                entry.last_unavailable = Some(now.clone());
            }
            entry
                .record
                .observe(now.is_unavailable(), now.is_available(), Instant::now());
            let changed = before.as_ref() != Some(&now);
            // Said at a change, and for an object first seen unavailable (e.g. at start).
            changed && (before.is_some() || now.is_unavailable())
        };
        if !transition {
            return;
        }
        let uid = obj.metadata.uid.as_deref();
        match &now {
            Observed::Unavailable { .. } => {
                info!("{name} is {now}");
                self.events
                    .record_with(name, uid, EventReason::Unavailable, || {
                        format!("{name} is {now}")
                    });
            }
            Observed::Available { .. } => {
                info!("{name} is {now}");
                self.events
                    .record_with(name, uid, EventReason::Available, || {
                        format!("{name} is {now}")
                    });
            }
            Observed::Unknown => log::debug!("{name}: {now}"),
        }
    }

    /// The object is gone from the cache (or is not ours).
    pub(crate) fn observe_gone(&self, name: &str) {
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.get_mut(name) {
            entry.observed = None;
            entry.record.unavailable_since = None;
            if entry.after.is_none() && entry.record.withdrawn.is_none() {
                entries.remove(name);
            }
        }
    }

    /// The decision's withdrawal input for `name` now; schedules a look at the time a timer
    /// (not a watch event) would change the answer.
    pub(crate) fn withdrawal(&self, name: &str, desired: Option<&Desired>) -> Withdrawal {
        if desired.is_none() {
            return Withdrawal::Keep;
        }
        let (record, policy, service) = {
            let entries = self.entries.lock();
            let Some(entry) = entries.get(name) else {
                return Withdrawal::Keep;
            };
            let policy = entry.after.map_or(Policy::Off, Policy::After);
            (
                entry.record.clone(),
                policy,
                desired.and_then(|d| d.object.spec.service.clone()),
            )
        };
        let ready = match (&record.withdrawn, &service) {
            (Some(_), Some(svc)) => self.backends.ready(svc).is_ok(),
            _ => false,
        };
        let now = Instant::now();
        let (w, recheck) = record.fact(policy, ready, now);
        if let Some(at) = recheck {
            self.queue
                .add_after(name.to_string(), at.saturating_duration_since(now));
        }
        if w == Withdrawal::Due {
            // What could not be seen coming back is never taken away: withdraw only while the
            // backend's namespace is listed (the listing brings the name back here).
            let ns = service.as_ref().map_or("", |s| &*s.namespace);
            if !self.backends.is_synced(ns) {
                let mut entries = self.entries.lock();
                if let Some(e) = entries.get_mut(name).filter(|e| !e.warned_unwatched) {
                    e.warned_unwatched = true;
                    warn!(
                        "{name}: unavailable long enough to be withdrawn, but kept: Services and \
                         EndpointSlices in {ns:?} are not listed (yet), so its return could not be seen"
                    );
                }
                return Withdrawal::Keep;
            }
        }
        w
    }

    /// A withdrawal's delete of `name` succeeded.
    pub(crate) fn withdrawn(&self, name: &str, uid: Option<&str>) {
        let (after, hold, reason, service, count) = {
            let mut entries = self.entries.lock();
            let Some(entry) = entries.get_mut(name) else {
                return;
            };
            let after = entry.after.unwrap_or_default();
            let reason = entry
                .last_unavailable
                .as_ref()
                .map_or_else(|| "unavailable".to_string(), ToString::to_string);
            let hold = entry.record.withdraw(after, Instant::now());
            entry.withdrawals += 1;
            (
                after,
                hold,
                reason,
                entry.service.clone(),
                entry.withdrawals,
            )
        };
        let (ns, svc) = service.unwrap_or_default();
        let hold_note = if hold.is_zero() {
            String::new()
        } else {
            format!(" and not before {hold:?} (withdrawn again without becoming available)")
        };
        let note = format!(
            "{name} withdrawn after {after:?} {reason}; registered again when service/{svc} in \
             {ns:?} has a ready endpoint{hold_note} (withdrawal {count})"
        );
        info!("{note}");
        self.events.record(name, uid, EventReason::Withdrawn, &note);
    }

    /// `name` was created; a withdrawn registration is thereby restored (then true).
    pub(crate) fn created(&self, name: &str, uid: Option<&str>) -> bool {
        let (since, service) = {
            let mut entries = self.entries.lock();
            let Some(entry) = entries.get_mut(name) else {
                return false;
            };
            let Some((at, _)) = entry.record.withdrawn else {
                return false;
            };
            entry.record.restore();
            (at, entry.service.clone())
        };
        let why = match (service, self.global) {
            (Some((ns, svc)), _) => format!("service/{svc} in {ns:?} has a ready endpoint"),
            (None, _) => "withdrawal is off for it now".to_string(),
        };
        let note = format!(
            "{name} restored after {:?} withdrawn: {why}",
            Duration::from_millis(since.elapsed().as_millis() as u64)
        );
        info!("{note}");
        self.events.record(name, uid, EventReason::Restored, &note);
        true
    }

    /// Whether `name` is held withdrawn now.
    pub fn is_withdrawn(&self, name: &str) -> bool {
        self.entries
            .lock()
            .get(name)
            .is_some_and(|e| e.record.withdrawn.is_some())
    }

    /// Whether a change of `name`'s availability can change what its sync decides: withdrawal
    /// is on for it, or it is held withdrawn.
    pub(crate) fn decides(&self, name: &str) -> bool {
        self.entries
            .lock()
            .get(name)
            .is_some_and(|e| e.after.is_some() || e.record.withdrawn.is_some())
    }

    /// A Service or EndpointSlice in `ns` changed: decide the withdrawn names there again (and
    /// unavailable ones, whose withdrawal may have waited for this namespace's listing).
    fn backend_changed(&self, ns: &str) {
        let names: Vec<String> = self
            .entries
            .lock()
            .iter()
            .filter(|(_, e)| {
                (e.record.withdrawn.is_some() || e.record.unavailable_since.is_some())
                    && e.service.as_ref().is_some_and(|(n, _)| n == ns)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in names {
            self.queue.add(name);
        }
    }

    /// Namespaces whose Services and EndpointSlices are watched now, sorted.
    pub fn watched_namespaces(&self) -> Vec<String> {
        self.backends.namespaces()
    }

    /// Starts the backend watches.
    pub(crate) fn start(&self) {
        self.backends.start();
    }

    /// Stops the backend watches.
    pub(crate) fn stop(&self) {
        self.backends.stop();
    }

    /// Stops the backend watches and waits for their threads.
    pub(crate) fn shutdown(&self) {
        self.backends.shutdown();
    }

    /// The metrics, in the Prometheus text format.
    pub fn render_prometheus(&self) -> String {
        let entries = self.entries.lock();
        let mut names: Vec<&String> = entries.keys().collect();
        crate::sort::sort(&mut names);
        let mut out = String::new();
        let header = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        header(
            &mut out,
            "autoregister_apiservice_available",
            "gauge",
            "Whether an APIService of ours is available (1) or not (0), from its Available condition.",
        );
        for n in &names {
            if let Some(v) = entries[*n].observed.as_ref().and_then(Observed::gauge) {
                let _ = writeln!(
                    out,
                    "autoregister_apiservice_available{{apiservice=\"{}\"}} {v}",
                    escape_label(n)
                );
            }
        }
        header(
            &mut out,
            "autoregister_apiservice_availability_info",
            "gauge",
            "The Available condition of an APIService of ours: status, reason and the cause code autoregister explain starts from as labels, value 1.",
        );
        for n in &names {
            if let Some(o) = entries[*n].observed.as_ref() {
                let status = match o {
                    Observed::Available { .. } => "True",
                    Observed::Unavailable { .. } => "False",
                    Observed::Unknown => "Unknown",
                };
                let _ = writeln!(
                    out,
                    "autoregister_apiservice_availability_info{{apiservice=\"{}\",status=\"{status}\",reason=\"{}\",cause=\"{}\"}} 1",
                    escape_label(n),
                    escape_label(o.reason()),
                    o.cause()
                );
            }
        }
        header(
            &mut out,
            "autoregister_apiservice_withdrawn",
            "gauge",
            "Whether a desired APIService with withdrawal on is withdrawn (1: deliberately absent while its backend is unavailable).",
        );
        for n in &names {
            let e = &entries[*n];
            if e.after.is_some() || e.record.withdrawn.is_some() {
                let _ = writeln!(
                    out,
                    "autoregister_apiservice_withdrawn{{apiservice=\"{}\"}} {}",
                    escape_label(n),
                    u8::from(e.record.withdrawn.is_some())
                );
            }
        }
        header(
            &mut out,
            "autoregister_apiservice_withdrawals_total",
            "counter",
            "Withdrawals of an unavailable APIService since start.",
        );
        for n in &names {
            let e = &entries[*n];
            if e.after.is_some() || e.withdrawals > 0 {
                let _ = writeln!(
                    out,
                    "autoregister_apiservice_withdrawals_total{{apiservice=\"{}\"}} {}",
                    escape_label(n),
                    e.withdrawals
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{APIServiceSpec, ServiceReference, DEFAULT_LABEL_KEY};
    use crate::client::Config;
    use crate::controller::decision::SyncMode;

    fn unavailable(name: &str) -> APIService {
        let mut o = APIService::new(
            name,
            APIServiceSpec {
                service: Some(ServiceReference {
                    namespace: "ns".into(),
                    name: "svc".into(),
                    port: Some(443),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        o.metadata.set_label(DEFAULT_LABEL_KEY, "true");
        o.metadata.uid = Some("uid-1".into());
        o.status = Some(status::available_status(
            "False",
            "ServiceNotFound",
            r#"service/svc in "ns" is not present"#,
        ));
        o
    }

    #[test]
    fn nothing_is_withdrawn_while_its_backend_namespace_is_not_listed() {
        // Never started: the namespace is tracked but not listed (as with a 403 on the list).
        let client = Client::new(Config::new("http://127.0.0.1:9")).unwrap();
        let queue = Arc::new(RateLimitingQueue::with_defaults("test"));
        let a = Availability::new(
            client,
            ReflectorOptions::default(),
            queue,
            EventRecorder::disabled(),
            Some(Duration::from_millis(1)),
        );
        let obj = unavailable("v1.x.example.com");
        let desired = Desired::new(&obj, SyncMode::Always);
        a.track_desired("v1.x.example.com", Some(&desired));
        assert_eq!(a.watched_namespaces(), ["ns"]);
        a.observe(&obj, true);
        // The clock moves past the 1 ms allowed.
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            a.withdrawal("v1.x.example.com", Some(&desired)),
            Withdrawal::Keep
        );
        let text = a.render_prometheus();
        assert!(
            text.contains("autoregister_apiservice_available{apiservice=\"v1.x.example.com\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("autoregister_apiservice_withdrawn{apiservice=\"v1.x.example.com\"} 0\n"),
            "{text}"
        );
        // Removed from the desired set: no longer watched.
        a.track_desired("v1.x.example.com", None);
        assert!(a.watched_namespaces().is_empty());
    }
}

//! The embeddable controller: registration methods, start, wait, shutdown.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::Mutex;

use super::availability::Availability;
use super::ca::{CaSource, CaSources};
use super::decision::{Action, Desired, Ownership, SyncMode, DECLARED_UP_TO_DATE};
use super::events::EventRecorder;
use super::fights::FightDetector;
use super::metrics::{ControllerMetrics, Gauges};
use super::report::Reporters;
use super::state::State;
use super::sync::{self, SyncContext, SyncError};
use crate::api::{APIService, Resource};
use crate::client::{Api, Canceller, Client, WriteGate};
use crate::hash::Set;
use crate::runtime::clock::deadline_after;
use crate::runtime::liveness::Liveness;
use crate::runtime::reachability::{Change, Reachability};
use crate::runtime::reflector::{
    EventHandler, Reflector, ReflectorHandle, ReflectorOptions, Transformed, DEFAULT_RELIST,
};
use crate::runtime::store::Store;
use crate::runtime::timers::Timers;
use crate::runtime::workqueue::{QueueMetrics, RateLimitingQueue};

/// Name of the workqueue (the `name` label of its metrics), as upstream.
pub const QUEUE_NAME: &str = "autoregister";

/// Settings of a [`Controller`]: made with [`ControllerOptions::new`], which takes the one
/// setting that has no safe default, the ownership label key.
///
/// ```
/// let mut options = autoregister::ControllerOptions::new("example.com/registered-by");
/// options.workers = 4;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ControllerOptions {
    /// Worker threads processing names in parallel.
    pub workers: usize,
    /// Re-deliver every cached object this often (None: never).
    pub resync: Option<Duration>,
    /// List everything from the server again this often (None: never; default
    /// [`DEFAULT_RELIST`], 10 min): catches changes no watch or error showed.
    pub relist: Option<Duration>,
    /// The ownership label: objects carrying it with `onstart`/`true` are ours. One
    /// instance (or one leader-elected group) per key: two programs sharing a key delete
    /// each other's APIServices, as each sees the other's as "ours, not desired".
    pub label_key: String,
    /// Take over desired objects that carry no ownership label, in place.
    pub adopt: bool,
    /// Let an empty desired set deregister everything we manage.
    pub allow_empty: bool,
    /// `fieldManager` of our creates and updates (shown in `managedFields`); `None` (the
    /// default): the program name of the client's [`Config::user_agent`](crate::client::Config::user_agent).
    pub field_manager: Option<String>,
    /// Record Kubernetes Events for writes and refusals, reported by this instance name
    /// (the leader-election identity); `None` (the default): no Events.
    pub events_instance: Option<String>,
    /// Withdraw an APIService of ours that has been unavailable this long, until its backend
    /// looks ready (`None`, the default: only where the annotation
    /// `autoregister.dev/withdraw-unavailable-after` asks).
    pub withdraw_unavailable: Option<Duration>,
    /// A CA bundle whose first certificate expires within this long gets a Warning Event
    /// (default [`DEFAULT_EXPIRY_WARNING`](super::ca::DEFAULT_EXPIRY_WARNING), 14 days).
    pub ca_expiry_warning: Duration,
    /// The longest a put-back waits while another writer keeps undoing our writes to a
    /// name (default 30 s; clamped to 5 ms–1000 s). Once nobody has undone our write for
    /// twice this long, the next edit is put back at once again.
    pub fight_backoff_max: Duration,
}

impl ControllerOptions {
    /// Defaults (2 workers, relist every 10 min, no adoption, no Events) owning the objects
    /// labelled `label_key`: a key of the embedding program's own (e.g.
    /// `example.com/registered-by`), never one another controller uses.
    pub fn new(label_key: impl Into<String>) -> Self {
        ControllerOptions {
            workers: 2,
            resync: None,
            events_instance: None,
            relist: Some(DEFAULT_RELIST),
            label_key: label_key.into(),
            adopt: false,
            allow_empty: false,
            withdraw_unavailable: None,
            field_manager: None,
            ca_expiry_warning: super::ca::DEFAULT_EXPIRY_WARNING,
            fight_backoff_max: super::fights::DEFAULT_FIGHT_BACKOFF_MAX,
        }
    }

    /// The ownership policy these options describe.
    #[doc(hidden)]
    pub fn ownership(&self) -> Ownership {
        Ownership {
            label_key: self.label_key.clone(),
            adopt: self.adopt,
            allow_empty: self.allow_empty,
            field_manager: self
                .field_manager
                .clone()
                .unwrap_or_else(|| super::decision::DEFAULT_FIELD_MANAGER.to_string()),
        }
    }
}

/// The [`Pending::reason`] of a name that has not been tried (or not finished) yet, as
/// opposed to one whose last attempt failed.
pub const NOT_SYNCED_YET: &str = "not synced yet";

/// A name that has not synced successfully yet, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// APIService name.
    pub name: String,
    /// The last error, or why it has not been tried.
    pub reason: String,
    /// A guard holds it (not ours, empty desired set): waiting longer will not help.
    pub blocked: bool,
}

/// The autoregister controller; a cheap, `Clone + Send + Sync` handle.
///
/// Threads started by [`start`](Self::start) run until [`shutdown`](Self::shutdown):
/// dropping the handles does not stop them.
///
/// # Example
///
/// Register an APIService, wait until it is in place, deregister it from another thread,
/// and stop:
///
/// ```
/// # #[cfg(feature = "testing")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # // A test API server stands in for the cluster; KUBECONFIG points at it.
/// # let server = autoregister::testserver::TestServer::start();
/// # let kubeconfig = std::env::temp_dir().join(format!("autoregister-doc-{}", std::process::id()));
/// # server.write_kubeconfig(&kubeconfig)?;
/// # std::env::set_var("KUBECONFIG", &kubeconfig);
/// use std::time::Duration;
/// use autoregister::{
///     APIService, APIServiceSpec, Client, Config, ConnectOptions, Controller, ControllerOptions,
/// };
///
/// let client = Client::new(Config::infer(&ConnectOptions::default())?)?;
/// let mut options = ControllerOptions::new("example.com/registered-by");
/// options.allow_empty = true; // removing the last name deletes it
/// let controller = Controller::new(client, options);
/// let spec = APIServiceSpec {
///     group: "example.com".into(),
///     version: "v1".into(),
///     group_priority_minimum: 1000,
///     version_priority: 15,
///     ..Default::default()
/// };
/// controller.add_api_service_to_sync(APIService::new("v1.example.com", spec));
/// controller.start();
/// controller.wait_converged(Duration::from_secs(10)).map_err(|p| format!("{p:?}"))?;
/// # assert!(server.get_object("apiservices", None, "v1.example.com").is_some());
///
/// // A clone is the same controller: any thread may add or remove names.
/// let handle = controller.clone();
/// std::thread::spawn(move || handle.remove_api_service_to_sync("v1.example.com"))
///     .join()
///     .expect("the thread ran");
/// controller.wait_converged(Duration::from_secs(10)).map_err(|p| format!("{p:?}"))?;
/// # assert!(server.get_object("apiservices", None, "v1.example.com").is_none());
/// controller.shutdown();
/// # std::fs::remove_file(&kubeconfig)?;
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "testing"))]
/// # fn main() {}
/// ```
#[derive(Clone)]
pub struct Controller {
    inner: Arc<Inner>,
}

struct Inner {
    api: Api<APIService>,
    /// Ends every request of `api` (and its watch) at shutdown.
    cancel: Canceller,
    /// The caller's gate (leadership), shared with the client, which asks it last.
    write_gate: Arc<parking_lot::RwLock<Option<WriteGate>>>,
    /// Heartbeats of the reflector and the workers, for `/healthz`.
    liveness: Arc<Liveness>,
    options: ControllerOptions,
    ownership: Ownership,
    fights: FightDetector,
    state: State,
    store: Arc<Store<APIService>>,
    queue: Arc<RateLimitingQueue<String>>,
    report: Reporters,
    /// Availability of our APIServices; withdrawal of unavailable ones.
    availability: Arc<Availability>,
    /// Sources of desired CA bundles and their watches.
    ca: CaSources,
    threads: Mutex<Threads>,
    /// The thread shared by timed tasks (see `runtime::timers`).
    timers: Arc<Timers>,
    /// Whether the API server answers; closed by a write that got no answer (or a failing
    /// list/watch), opened by the reflector's next answered list or watch.
    reach: Arc<Reachability>,
    /// Names whose write found the server unreachable: decided again once it answers, not
    /// each on its own backoff.
    parked: Mutex<Set<String>>,
}

#[derive(Default)]
struct Threads {
    started: bool,
    reflector: Option<ReflectorHandle>,
    others: Vec<JoinHandle<()>>,
}

/// Enqueues the name of every object the reflector reports, and every name after a relist.
struct Enqueue {
    queue: Arc<RateLimitingQueue<String>>,
    /// Weak: the controller owns the reflector that owns this handler.
    inner: Weak<Inner>,
}

impl Enqueue {
    /// Availability first, so the sync the add brings sees it.
    fn observe(&self, obj: &APIService, gone: bool) {
        if let Some(inner) = self.inner.upgrade() {
            if gone {
                inner.availability.observe_gone(obj.name());
            } else {
                inner
                    .availability
                    .observe(obj, inner.ownership.is_managed(obj));
            }
        }
    }
}

impl EventHandler<APIService> for Enqueue {
    fn on_add(&self, obj: &Arc<APIService>) {
        self.observe(obj, false);
        if let Some(inner) = self.inner.upgrade() {
            let ours = inner
                .state
                .note_seen(obj.name(), obj.metadata.uid.as_deref());
            // Our own create, as the server stored it: its sync would decide what the
            // create did, unless admission changed a declared field or the manifest
            // changed while the create was on its way (then the sync puts it right).
            if ours && inner.up_to_date(obj) {
                return;
            }
        }
        self.queue.add(obj.name().to_string());
    }
    fn on_update(&self, old: &Arc<APIService>, new: &Arc<APIService>) {
        self.observe(new, false);
        // kube-aggregator writes the status of every new APIService (and again at each change
        // of its availability): a sync of such an event decides what the previous one did,
        // unless withdrawal reads the availability. Its transition is recorded above; wake
        // `--wait-available` (an observer: the `--once` waiter reads no status).
        if let Some(inner) = self.inner.upgrade() {
            // A resync delivers the object twice, unchanged: that one is synced.
            let written = old.metadata.resource_version != new.metadata.resource_version;
            let ours = inner.ownership.is_managed(new) && inner.ownership.is_managed(old);
            if written
                && ours
                && old.changed_only_in_status(new)
                && !inner.availability.decides(new.name())
            {
                inner.state.status_observed();
                return;
            }
            // Our own apply, or another writer's change of what we do not declare: a sync
            // would decide "nothing to do" and record the success this name already has.
            if written && ours && inner.state.settled(new.name()) && inner.up_to_date(new) {
                return;
            }
        }
        self.queue.add(new.name().to_string());
    }
    fn on_delete(&self, obj: &Arc<APIService>) {
        self.observe(obj, true);
        if let Some(inner) = self.inner.upgrade() {
            inner
                .state
                .note_deleted(obj.name(), obj.metadata.uid.as_deref());
        }
        self.queue.add(obj.name().to_string());
    }
    /// After an outage, names whose writes failed meanwhile wait a per-name backoff grown
    /// over the outage, and their retries queue for the overall bucket (10/s): 1,000 names
    /// would take minutes. Retry every desired and cached name now (a plain add, not rate
    /// limited), so recovery is bounded by the reflector's backoff; an unchanged name is a
    /// cache lookup and no write.
    fn on_relisted(&self) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        inner.state.note_relisted();
        for name in inner
            .state
            .desired_names()
            .into_iter()
            .chain(inner.store.keys())
        {
            self.queue.add(name);
        }
    }
}

impl Controller {
    /// A controller for the cluster behind `client`; nothing runs until [`start`](Self::start).
    pub fn new(client: Client, options: ControllerOptions) -> Self {
        let mut ownership = options.ownership();
        if ownership.is_upstream_key() {
            warn!(
                "--label-key {} is kube-apiserver's own label: on a real cluster its built-in \
                 APIServices (v1., v1.apps, ...) then count as ours and may be deleted, and \
                 kube-apiserver deletes what we create. Use it only if this program is the \
                 cluster's aggregator",
                options.label_key
            );
        }
        let field_manager = match &options.field_manager {
            Some(m) => m.clone(),
            None => client.config().program_name().to_string(),
        };
        ownership.field_manager = field_manager.clone();
        let cancel = Canceller::new();
        let write_gate: Arc<parking_lot::RwLock<Option<WriteGate>>> = Arc::default();
        // The client asks the gate again right before sending: a worker may have waited for
        // the rate limiter or a credential since the sync asked it.
        let gate = {
            let (slot, cancel) = (write_gate.clone(), cancel.clone());
            Arc::new(move || may_write(&cancel, &slot)) as WriteGate
        };
        let reach = Arc::new(Reachability::new());
        let events = match &options.events_instance {
            // Its own client, so Event writes never queue behind (or delay) the controller's;
            // the same gate and canceller, so none is sent after a stop or a lost lease, and
            // none to a server known to be down (Events are best-effort: dropped, not sent).
            Some(instance) => match client.sibling() {
                Ok(c) => EventRecorder::new(
                    c.with_canceller(&cancel).with_write_gate({
                        let (gate, reach) = (gate.clone(), reach.clone());
                        Arc::new(move || {
                            gate()?;
                            match reach.down() {
                                Some(_) => Err("the API server cannot be reached".into()),
                                None => Ok(()),
                            }
                        })
                    }),
                    instance.clone(),
                    &field_manager,
                ),
                Err(e) => {
                    warn!("cannot build the Event client, no Events will be recorded: {e}");
                    EventRecorder::disabled()
                }
            },
            None => EventRecorder::disabled(),
        };
        let client = client.with_canceller(&cancel).with_write_gate(gate);
        // One thread for everything that only waits: the queue's delays, the resync, the CA
        // sources' polling, pacing Events.
        let timers = Timers::new("autoregister-timers");
        let queue = Arc::new(RateLimitingQueue::with_timers(QUEUE_NAME, &timers));
        let availability = Availability::new(
            client.clone(),
            ReflectorOptions {
                resync: None,
                relist: options.relist,
                ..Default::default()
            },
            queue.clone(),
            events.clone(),
            options.withdraw_unavailable,
        );
        // Sources are only read: the write gate does not concern them, the canceller does.
        let ca = CaSources::on_timers(
            client.clone(),
            queue.clone(),
            options.ca_expiry_warning,
            timers.clone(),
        );
        let inner = Arc::new(Inner {
            api: Api::all(client).with_field_manager(field_manager),
            ownership,
            fights: FightDetector::new(options.fight_backoff_max),
            cancel,
            write_gate,
            liveness: Liveness::new(),
            options,
            state: State::default(),
            store: Arc::new(Store::new()),
            queue,
            report: Reporters::new(Arc::new(ControllerMetrics::new()), events),
            availability,
            ca,
            threads: Mutex::new(Threads::default()),
            timers,
            reach,
            parked: Mutex::new(Set::default()),
        });
        let weak = Arc::downgrade(&inner);
        inner.reach.subscribe(move |change| {
            if let Some(inner) = weak.upgrade() {
                inner.reachability_changed(change);
            }
        });
        Controller { inner }
    }

    /// Registers `obj` to be synced once, when the controller starts (label `onstart`).
    ///
    /// An `Arc` is shared as it is, not copied. Its `spec.caBundle` may instead come from
    /// a Secret, ConfigMap or file named by an annotation ([`CaSource::annotate`](super::ca::CaSource::annotate)); an
    /// embedded server hands its own CA in directly as `spec.caBundle`.
    pub fn add_api_service_to_sync_on_start(&self, obj: impl Into<Arc<APIService>>) {
        self.add(obj.into(), SyncMode::OnStart);
    }

    /// Registers `obj` to be kept in sync continuously (label `true`).
    ///
    /// An `Arc` is shared as it is, not copied. A CA source annotation
    /// ([`CaSource::annotate`](super::ca::CaSource::annotate)) keeps `spec.caBundle` current as the source rotates.
    pub fn add_api_service_to_sync(&self, obj: impl Into<Arc<APIService>>) {
        self.add(obj.into(), SyncMode::Always);
    }

    /// Stops syncing `name`; a managed object left behind is deleted (unless that
    /// empties the desired set and `allow_empty` is off).
    pub fn remove_api_service_to_sync(&self, name: &str) {
        if self.inner.state.remove_desired(name).is_some() {
            debug!("{name}: removed from the desired set");
        }
        self.inner.availability.track_desired(name, None);
        self.inner.ca.forget(name);
        self.inner.queue.add(name.to_string());
    }

    fn add(&self, obj: Arc<APIService>, mode: SyncMode) {
        let name = obj.name().to_string();
        if name.is_empty() {
            // Nothing to key it by; the API would refuse it anyway.
            warn!("ignoring an APIService without metadata.name");
            return;
        }
        let was_empty = self.inner.state.desired_is_empty();
        let desired = Desired::shared(obj, mode);
        self.inner.availability.track_desired(&name, Some(&desired));
        // A malformed annotation tracks nothing; the sync reports it (and writes nothing).
        self.inner
            .ca
            .track(&name, CaSource::of(&desired.object).ok().flatten());
        self.inner.state.set_desired(name.clone(), desired);
        self.inner.queue.add(name);
        if was_empty {
            // The empty-set guard may be holding leftovers: with a set again, decide them anew.
            // Every undesired cached name, not only those recorded as blocked: a worker may be
            // deciding one under the empty set right now and record it after this loop.
            for n in self.inner.store.keys() {
                if self.inner.state.desired(&n).is_none() {
                    self.inner.queue.add(n);
                }
            }
        }
    }

    /// Starts the reflector and, once its cache has synced, the workers. Idempotent.
    pub fn start(&self) {
        let mut threads = self.inner.threads.lock();
        if threads.started {
            return;
        }
        threads.started = true;
        self.inner.report.events.start_on(&self.inner.timers);
        self.inner.ca.start();
        let opts = ReflectorOptions {
            resync: self.inner.options.resync,
            timers: Some(self.inner.timers.clone()),
            relist: self.inner.options.relist,
            liveness: Some(self.inner.liveness.clone()),
            reachability: Some(self.inner.reach.clone()),
            ..Default::default()
        };
        threads.reflector = Some(Reflector::spawn(
            // The cache keeps what decisions read and updates write back, not the
            // managedFields' field sets (most of an object, read by nobody).
            Transformed::new(self.inner.api.clone(), APIService::compact_for_cache),
            self.inner.store.clone(),
            Arc::new(Enqueue {
                queue: self.inner.queue.clone(),
                inner: Arc::downgrade(&self.inner),
            }),
            opts,
        ));
        self.inner.availability.start();
        // The first worker waits for the cache, then starts the others.
        let inner = self.inner.clone();
        let first = std::thread::Builder::new()
            .name("autoregister-worker-0".into())
            .spawn(move || inner.start_workers_after_sync());
        match first {
            Ok(h) => threads.others.push(h),
            Err(e) => log::error!("cannot start worker 0: {e}"),
        }
    }

    /// Waits until the cache has synced; false on timeout or shutdown.
    pub fn wait_until_synced(&self, timeout: Duration) -> bool {
        let deadline = deadline_after(Instant::now(), timeout);
        let inner = &self.inner;
        let synced = || inner.state.has_start();
        // Shutdown ends the wait: the cache will never sync after it.
        inner
            .state
            .wait_until(deadline, || synced() || inner.queue.is_shutting_down());
        synced()
    }

    /// Waits until every desired name, and every managed name present at start, has synced
    /// successfully once; on timeout or shutdown returns what is still pending and why.
    pub fn wait_converged(&self, timeout: Duration) -> Result<(), Vec<Pending>> {
        let deadline = deadline_after(Instant::now(), timeout);
        let inner = &self.inner;
        let managed = |n: &str| inner.is_managed(n);
        let done = || inner.state.has_start() && !inner.state.any_unsynced(managed, |_| true);
        // Names a guard holds will not sync by waiting: stop as soon as only they are left.
        let stuck = || {
            inner.state.has_start()
                && !inner
                    .state
                    .any_unsynced(managed, |n| !inner.state.is_blocked(n))
        };
        // Shutdown ends the wait: nothing syncs after it.
        inner.state.wait_until(deadline, || {
            done() || stuck() || inner.queue.is_shutting_down()
        });
        if done() {
            return Ok(());
        }
        if !inner.state.has_start() {
            let failing = inner
                .threads
                .lock()
                .reflector
                .as_ref()
                .and_then(ReflectorHandle::last_error);
            // Blame the server only for what it did: a short --timeout may just have ended
            // before the first list could answer.
            let reason = match failing {
                Some(e) => format!("the APIService cache never synced: {e}"),
                None => "the APIService cache had not synced yet: the first list had not \
                         answered in time"
                    .to_string(),
            };
            let mut names = inner.state.desired_names();
            crate::sort::sort(&mut names);
            return Err(names
                .into_iter()
                .map(|name| Pending {
                    name,
                    reason: reason.clone(),
                    blocked: false,
                })
                .collect());
        }
        Err(inner.pending())
    }

    /// `(converged, total)`: how many of the names [`wait_converged`](Self::wait_converged)
    /// waits for have synced once, out of how many (0 of the desired count before the cache
    /// has synced).
    pub fn progress(&self) -> (usize, usize) {
        let inner = &self.inner;
        if !inner.state.has_start() {
            return (0, inner.state.desired_names().len());
        }
        inner.state.progress(|name| inner.is_managed(name))
    }

    /// Whether [`start`](Self::start) has been called.
    pub fn is_started(&self) -> bool {
        self.inner.threads.lock().started
    }

    /// Whether the APIService cache has completed its first full list (readiness).
    pub fn is_synced(&self) -> bool {
        self.inner.store.has_synced()
    }

    /// The workqueue's metrics (queue name [`QUEUE_NAME`]), for `/metrics`.
    #[doc(hidden)]
    pub fn queue_metrics(&self) -> Arc<QueueMetrics> {
        self.inner.queue.metrics().clone()
    }

    /// The controller's own counters (syncs, manifest reloads); the manifest reload loop
    /// reports into them with [`ControllerMetrics::manifest_reload`].
    #[doc(hidden)]
    pub fn metrics(&self) -> &Arc<ControllerMetrics> {
        &self.inner.report.metrics
    }

    /// The Event recorder (disabled unless [`ControllerOptions::events_instance`] is set),
    /// e.g. to record a refusal such as [`EventReason::EmptySetRefused`](super::events::EventReason).
    #[doc(hidden)]
    pub fn events(&self) -> &EventRecorder {
        &self.inner.report.events
    }

    /// The set sizes behind the controller's gauges, counted now.
    #[doc(hidden)]
    pub fn gauges(&self) -> Gauges {
        self.inner.gauges()
    }

    /// The controller's metrics (counters and gauges) in the Prometheus text format.
    pub fn render_metrics(&self) -> String {
        let mut out = self.inner.report.metrics.render_prometheus(self.gauges());
        out.push_str(&self.inner.availability.render_prometheus());
        out.push_str(&self.inner.ca.render_metrics());
        out
    }

    /// Availability of our APIServices and withdrawal of unavailable ones.
    pub fn availability(&self) -> &Availability {
        &self.inner.availability
    }

    /// Waits until every desired APIService backed by a service is ours and `Available`
    /// (local ones are served by kube-apiserver itself and not waited for); on timeout or
    /// shutdown returns which are not, and why.
    pub fn wait_available(&self, timeout: Duration) -> Result<(), Vec<Pending>> {
        let deadline = deadline_after(Instant::now(), timeout);
        let inner = &self.inner;
        let not_available = || -> Vec<Pending> {
            let mut names = inner.state.desired_names();
            crate::sort::sort(&mut names);
            names
                .into_iter()
                .filter_map(|name| {
                    let desired = inner.state.desired(&name)?;
                    desired.object.spec.service.as_ref()?;
                    let reason = match inner.store.get(&name) {
                        _ if inner.availability.is_withdrawn(&name) => {
                            "withdrawn: its backend does not look ready".to_string()
                        }
                        None => "not registered".to_string(),
                        Some(o) if !inner.ownership.is_managed(&o) => {
                            "held by an object that is not ours".to_string()
                        }
                        Some(o) => match super::availability::Observed::of(&o) {
                            super::availability::Observed::Available { .. } => return None,
                            other => other.to_string(),
                        },
                    };
                    Some(Pending {
                        name,
                        reason,
                        blocked: false,
                    })
                })
                .collect()
        };
        // Reads the cached objects' status: woken by every status change the watch shows.
        inner.state.wait_observing(deadline, || {
            not_available().is_empty() || inner.queue.is_shutting_down()
        });
        let left = not_available();
        if left.is_empty() {
            Ok(())
        } else {
            Err(left)
        }
    }

    /// The heartbeats of this controller's threads (groups `reflector` and `workers`);
    /// others may register theirs (the manifest watcher). `/healthz` checks them.
    #[doc(hidden)]
    pub fn liveness(&self) -> &Arc<Liveness> {
        &self.inner.liveness
    }

    /// The ownership policy (label key, adopt, allow-empty) this controller applies.
    #[doc(hidden)]
    pub fn ownership(&self) -> &Ownership {
        &self.inner.ownership
    }

    /// Writes that redid work another writer had undone, and fights reported, since start.
    #[doc(hidden)]
    pub fn contested_writes(&self) -> (u64, u64) {
        (
            self.inner.fights.contested_writes(),
            self.inner.fights.fights(),
        )
    }

    /// The REST client this controller talks through (its metrics, its config).
    pub fn client(&self) -> &Client {
        self.inner.api.client()
    }

    /// Makes `gate` a condition of every write: a worker asks it right before each create,
    /// update or delete, and withholds the write when it answers `Err` (leader election:
    /// "still leading", judged on the clock, so a process frozen past its renew deadline
    /// writes nothing when it resumes, even before its elector notices the loss).
    pub fn set_write_gate(&self, gate: impl Fn() -> Result<(), String> + Send + Sync + 'static) {
        *self.inner.write_gate.write() = Some(Arc::new(gate));
    }

    /// Stops at once, without waiting: workers take no new name (queued names are dropped,
    /// not drained), in-flight requests are cancelled and no write is sent from now on.
    /// Safe from any thread (a signal handler thread, a leader-election hook);
    /// [`shutdown`](Self::shutdown) then waits for the threads.
    pub fn stop(&self) {
        self.inner.queue.shutdown();
        // The reflector first, so it takes its closed watch for the stop it is.
        if let Some(r) = &self.inner.threads.lock().reflector {
            r.stop();
        }
        self.inner.availability.stop();
        self.inner.ca.stop();
        self.inner.cancel.cancel();
        // Workers waiting for the server to come back stop waiting.
        self.inner.reach.shut();
        // No Event write after a stop either.
        self.inner.report.events.stop();
        self.inner.state.wake_all();
    }

    /// How long the API server has not answered and why, while writes are paused for it;
    /// `None` while it answers.
    #[doc(hidden)]
    pub fn unreachable(&self) -> Option<(Duration, String)> {
        self.inner.reach.down()
    }

    /// Whether [`stop`](Self::stop) or [`shutdown`](Self::shutdown) was called.
    pub fn is_stopped(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// [`stop`](Self::stop)s, then waits for every thread this controller started; a later
    /// [`start`](Self::start) does nothing.
    pub fn shutdown(&self) {
        self.stop();
        let mut threads = self.inner.threads.lock();
        // A start after shutdown must not spawn threads no later shutdown would stop.
        threads.started = true;
        if let Some(r) = threads.reflector.take() {
            r.join();
        }
        for h in threads.others.drain(..) {
            let _ = h.join();
        }
        self.inner.availability.shutdown();
        self.inner.ca.shutdown();
        // An Event being written ends within its timeout.
        self.inner.report.events.shutdown();
        // Last: every task on it has been cancelled.
        self.inner.timers.shutdown();
    }
}

/// Whether a write may be sent now: not stopped, and the caller's gate (if any) agrees.
fn may_write(
    cancel: &Canceller,
    gate: &parking_lot::RwLock<Option<WriteGate>>,
) -> Result<(), String> {
    if cancel.is_cancelled() {
        return Err("the controller is stopping".into());
    }
    match &*gate.read() {
        Some(gate) => gate(),
        None => Ok(()),
    }
}

impl Inner {
    fn start_workers_after_sync(self: Arc<Self>) {
        // Poll so a shutdown before the first list succeeds still ends this thread.
        while !self.store.wait_for_sync(Duration::from_millis(100)) {
            if self.queue.is_shutting_down() {
                return;
            }
        }
        let names: Set<String> = self.store.keys().into_iter().collect();
        info!(
            "cache synced: {} present at start",
            crate::text::count(names.len(), "APIService")
        );
        self.state.record_at_start(names);
        self.state.wake_all();
        // This thread is worker 0; it joins the others when the work ends.
        let mut workers = Vec::new();
        for i in 1..self.options.workers.max(1) {
            let inner = self.clone();
            match std::thread::Builder::new()
                .name(format!("autoregister-worker-{i}"))
                .spawn(move || inner.work())
            {
                Ok(h) => workers.push(h),
                Err(e) => log::error!("cannot start worker {i}: {e}"),
            }
        }
        self.work();
        for h in workers {
            let _ = h.join();
        }
    }

    fn may_write(&self) -> Result<(), String> {
        may_write(&self.cancel, &self.write_gate)
    }

    /// Longest one sync may take before its worker counts as stuck: a write and its retry
    /// after a 401, each with an exec plugin run, plus slack for the rate limiter.
    fn sync_bound(&self) -> Duration {
        let config = self.api.client().config();
        config
            .timeout
            .saturating_add(config.exec_timeout)
            .saturating_mul(2)
            .saturating_add(Duration::from_secs(30))
    }

    /// One log line per pause and per resume, not one per name; on resume, the names whose
    /// writes found the server down are decided again.
    fn reachability_changed(&self, change: &Change) {
        match change {
            Change::Lost(why) => warn!(
                "the API server cannot be reached ({why}); writes paused until it answers a \
                 list or watch again"
            ),
            Change::Regained(after) => {
                let parked: Vec<String> = self.parked.lock().drain().collect();
                for name in parked {
                    self.queue.add(name);
                }
                info!(
                    "the API server answers again after {:.1}s; writes resume, {} names waiting",
                    after.as_secs_f64(),
                    self.queue.len()
                );
            }
        }
    }

    fn work(&self) {
        let heartbeat = self.liveness.register("workers");
        let bound = self.sync_bound();
        while let Some(name) = {
            heartbeat.idle();
            self.queue.get()
        } {
            // While the server cannot be reached, wait (idle, not stuck) for the reflector
            // to reach it again; a stop ends the wait and the name is dropped.
            if !self.reach.wait_reachable(|| self.cancel.is_cancelled()) {
                self.queue.done(&name);
                continue;
            }
            heartbeat.busy_for(bound, "sync");
            let may_write = || self.may_write();
            let cx = SyncContext {
                state: &self.state,
                store: &self.store,
                ownership: &self.ownership,
                api: &self.api,
                fights: &self.fights,
                report: &self.report,
                availability: &self.availability,
                may_write: &may_write,
                ca: &self.ca,
            };
            match sync::sync(&cx, &name) {
                Ok(wait) => {
                    self.queue.forget(&name);
                    // A put-back held back by its pace in a fight: decided again then.
                    if let Some(wait) = wait {
                        self.queue.add_after(name.clone(), wait);
                    }
                }
                // Stopping: nothing to retry (the queue takes no more adds anyway).
                Err(e) if e.is_cancelled() => {}
                // Not this name's fault: every name waits for the server, this one with them.
                Err(SyncError::Write(e)) if e.is_unreachable() => {
                    self.parked.lock().insert(name.clone());
                    self.reach.lost(&e.to_string());
                }
                // Refused as invalid: the same write waits; a change requeues the name sooner.
                Err(e) if e.rejected_retry().is_some() => {
                    self.queue.forget(&name);
                    if let Some(after) = e.rejected_retry() {
                        self.queue.add_after(name.clone(), after);
                    }
                }
                Err(e) => {
                    // The server's "not before" holds on every path that queues the name
                    // (watch events, resync, relist, reloads), not only on this retry.
                    if let Some(ra) = e.retry_after() {
                        self.queue.hold(name.clone(), ra);
                    }
                    // The server's Retry-After (or a stale cache) floors the per-key
                    // backoff, never replaces it.
                    self.queue
                        .add_rate_limited_at_least(name.clone(), e.retry_floor());
                }
            }
            self.queue.done(&name);
        }
        heartbeat.retire();
    }

    /// Whether a sync of `obj`, the object a watch event just cached, would find every
    /// declared field in place and decide nothing to do. Entries whose CA bundle comes from
    /// a source are left to the sync, which fills the bundle in.
    fn up_to_date(&self, obj: &APIService) -> bool {
        let name = obj.name();
        let Some(desired) = self.state.desired(name) else {
            return false;
        };
        if !matches!(CaSource::of(&desired.object), Ok(None)) {
            return false;
        }
        let d = sync::plan(
            &self.state,
            Some(obj),
            &self.ownership,
            &self.availability,
            name,
            Some(desired),
        );
        matches!(d.action, Action::None) && d.reason == DECLARED_UP_TO_DATE
    }

    /// Whether the cached object `name` carries our ownership label.
    fn is_managed(&self, name: &str) -> bool {
        self.store
            .get(name)
            .is_some_and(|o| self.ownership.is_managed(&o))
    }

    /// Whether `obj` carries our ownership label (`onstart` or `true`), for the gauges.
    fn is_ours(&self, obj: &APIService) -> bool {
        self.ownership.is_managed(obj)
    }

    /// Up to `limit` names `--once` still waits for (see [`State::unsynced`]).
    fn unsynced(&self, limit: usize) -> Vec<String> {
        self.state.unsynced(|name| self.is_managed(name), limit)
    }

    /// Counts the desired set, our cached objects, and desired names someone else holds.
    fn gauges(&self) -> Gauges {
        let desired = self.state.desired_names();
        let unowned_desired = desired
            .iter()
            .filter(|n| self.store.get(n).is_some_and(|o| !self.is_ours(&o)))
            .count();
        let managed = self.store.list().iter().filter(|o| self.is_ours(o)).count();
        Gauges {
            desired: desired.len(),
            managed,
            unowned_desired,
            fighting: self.fights.in_fight(Instant::now()),
        }
    }

    fn pending(&self) -> Vec<Pending> {
        self.unsynced(usize::MAX)
            .into_iter()
            .map(|name| {
                let reason = self
                    .state
                    .failure(&name)
                    .unwrap_or_else(|| NOT_SYNCED_YET.into());
                let blocked = self.state.is_blocked(&name);
                Pending {
                    name,
                    reason,
                    blocked,
                }
            })
            .collect()
    }
}

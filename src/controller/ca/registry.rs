//! The CA sources in use: one watch per referenced object (or a poll per file), which
//! APIService names use each, and what each source holds now. A change of a source
//! re-queues every name using it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use parking_lot::Mutex;

use super::named::Named;
use super::pem::CaBundle;
use super::source::CaSource;
use crate::api::{ConfigMap, Resource, Secret};
use crate::client::{Api, Client};
use crate::hash::Map;
use crate::runtime::reflector::{EventHandler, Reflector, ReflectorHandle, ReflectorOptions};
use crate::runtime::store::Store;
use crate::runtime::timers::{Task, TimerHandle, Timers};
use crate::runtime::workqueue::RateLimitingQueue;

/// How often files are read for changes (as the manifests are).
const FILE_POLL: Duration = Duration::from_secs(1);
/// How often the names with a bundle are synced again so an expiry warning fires even
/// when nothing changes.
const EXPIRY_RECHECK: Duration = Duration::from_secs(600);
/// Tick of the sources task while a source's first read is outstanding: how soon that
/// read re-queues its users. Otherwise it wakes once per [`FILE_POLL`].
const TICK: Duration = Duration::from_millis(100);

/// Why a source gave no bundle.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unresolved {
    /// Not read yet (or the read keeps failing, e.g. forbidden): wait and retry.
    Pending(String),
    /// Read, and unusable: missing, no such key, empty, not PEM, a private key. Nothing is
    /// written until the source changes.
    Invalid(String),
}

impl Unresolved {
    /// The message: names the source and the reason.
    pub fn message(&self) -> &str {
        match self {
            Unresolved::Pending(m) | Unresolved::Invalid(m) => m,
        }
    }
}

/// The CA sources of one controller.
pub(crate) struct CaSources {
    /// A bundle expiring within this long gets a Warning Event.
    pub(crate) expiry_warning: Duration,
    shared: Arc<Shared>,
    /// Where the polling task runs (the controller's shared timers).
    timers: Arc<Timers>,
    /// The polling task, once started; cancelled on stop.
    task: Mutex<Option<TimerHandle>>,
}

struct Shared {
    client: Client,
    queue: Arc<RateLimitingQueue<String>>,
    registry: Mutex<Registry>,
    /// When the polling task next reads files and re-queues names with a bundle.
    due: Mutex<Due>,
    /// apiservice → earliest `notAfter` (Unix seconds) of its bundle.
    expiry: Mutex<BTreeMap<String, i64>>,
    /// apiservice → the `notAfter` already warned about.
    warned: Mutex<Map<String, i64>>,
}

struct Due {
    file_poll: Instant,
    expiry: Instant,
}

#[derive(Default)]
struct Registry {
    started: bool,
    stopped: bool,
    by_name: Map<String, CaSource>,
    users: BTreeMap<CaSource, BTreeSet<String>>,
    watches: Map<CaSource, Watch>,
}

enum Watch {
    Secret {
        store: Arc<Store<Secret>>,
        reflector: ReflectorHandle,
        seen_synced: bool,
    },
    ConfigMap {
        store: Arc<Store<ConfigMap>>,
        reflector: ReflectorHandle,
        seen_synced: bool,
    },
    File {
        /// What the last poll read (content or the error's kind).
        last: Option<Result<Vec<u8>, std::io::ErrorKind>>,
    },
}

impl Watch {
    fn stop(&self) {
        match self {
            Watch::Secret { reflector, .. } | Watch::ConfigMap { reflector, .. } => {
                reflector.stop()
            }
            Watch::File { .. } => {}
        }
    }
}

/// Re-queues the users of one source on every change the reflector reports.
struct Requeue {
    shared: Weak<Shared>,
    source: CaSource,
}

impl<K> EventHandler<K> for Requeue {
    fn on_add(&self, _: &Arc<K>) {
        self.fire();
    }
    fn on_update(&self, _: &Arc<K>, _: &Arc<K>) {
        self.fire();
    }
    fn on_delete(&self, _: &Arc<K>) {
        self.fire();
    }
    fn on_relisted(&self) {
        self.fire();
    }
}

impl Requeue {
    fn fire(&self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.requeue(&self.source);
        }
    }
}

impl Shared {
    fn requeue(&self, source: &CaSource) {
        let names: Vec<String> = self
            .registry
            .lock()
            .users
            .get(source)
            .map(|u| u.iter().cloned().collect())
            .unwrap_or_default();
        for n in names {
            self.queue.add(n);
        }
    }
}

impl CaSources {
    /// Sources read through `client`; changes re-queue names on `queue`.
    /// Its polling on a thread of its own, `ca-sources` (started with it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn new(
        client: Client,
        queue: Arc<RateLimitingQueue<String>>,
        expiry_warning: Duration,
    ) -> Self {
        Self::on_timers(client, queue, expiry_warning, Timers::new("ca-sources"))
    }

    /// Its polling a task of `timers` (the controller's shared ones).
    pub(crate) fn on_timers(
        client: Client,
        queue: Arc<RateLimitingQueue<String>>,
        expiry_warning: Duration,
        timers: Arc<Timers>,
    ) -> Self {
        let now = Instant::now();
        CaSources {
            expiry_warning,
            shared: Arc::new(Shared {
                client,
                queue,
                registry: Mutex::default(),
                due: Mutex::new(Due {
                    file_poll: now,
                    expiry: now + EXPIRY_RECHECK,
                }),
                expiry: Mutex::default(),
                warned: Mutex::default(),
            }),
            timers,
            task: Mutex::new(None),
        }
    }

    /// Records that `name` takes its bundle from `source` (`None`: from nowhere any more);
    /// starts the source's watch when the controller runs, stops one nobody uses.
    pub(crate) fn track(&self, name: &str, source: Option<CaSource>) {
        let (dropped, added) = {
            let mut r = self.shared.registry.lock();
            let old = match &source {
                Some(s) => r.by_name.insert(name.to_string(), s.clone()),
                None => r.by_name.remove(name),
            };
            if old == source {
                return;
            }
            let (mut dropped, mut added) = (None, false);
            if let Some(old) = old {
                let now_unused = r.users.get_mut(&old).is_some_and(|u| {
                    u.remove(name);
                    u.is_empty()
                });
                if now_unused {
                    r.users.remove(&old);
                    dropped = r.watches.remove(&old);
                }
            }
            if let Some(s) = source {
                r.users
                    .entry(s.clone())
                    .or_default()
                    .insert(name.to_string());
                if r.started && !r.stopped && !r.watches.contains_key(&s) {
                    let w = self.watch(&s);
                    r.watches.insert(s, w);
                    added = true;
                }
            }
            (dropped, added)
        };
        // Outside the lock: stopping a reflector waits for its thread, whose handler takes
        // it, and a poll in progress takes it too.
        drop(dropped);
        if added {
            if let Some(t) = &*self.task.lock() {
                t.schedule_now();
            }
        }
    }

    /// Starts a watch per source in use and the task that polls files (it runs only while
    /// some source or bundle needs it).
    pub(crate) fn start(&self) {
        {
            let mut r = self.shared.registry.lock();
            if r.started {
                return;
            }
            r.started = true;
            let sources: Vec<CaSource> = r.users.keys().cloned().collect();
            for s in sources {
                let w = self.watch(&s);
                r.watches.insert(s, w);
            }
        }
        let task = self.timers.add(
            Arc::new(Poll(self.shared.clone())),
            Some(self.timers.clock().now()),
        );
        *self.task.lock() = Some(task);
    }

    /// Stops every watch and the polling task; waits for a poll in progress, not for the
    /// watches' threads.
    pub(crate) fn stop(&self) {
        {
            let mut r = self.shared.registry.lock();
            r.stopped = true;
            r.watches.values().for_each(Watch::stop);
        }
        if let Some(t) = self.task.lock().take() {
            t.cancel();
        }
    }

    /// Stops and waits for every thread.
    pub(crate) fn shutdown(&self) {
        self.stop();
        let watches: Vec<Watch> = {
            let mut r = self.shared.registry.lock();
            r.watches.drain().map(|(_, w)| w).collect()
        };
        drop(watches);
    }

    /// What `source` holds now, as a bundle.
    pub(crate) fn resolve(&self, source: &CaSource) -> Result<CaBundle, Unresolved> {
        let r = self.shared.registry.lock();
        match (source, r.watches.get(source)) {
            (CaSource::File(path), _) => {
                drop(r);
                read_file(source, path)
            }
            (_, None) => Err(Unresolved::Pending(format!(
                "{source}: not read yet (the controller has not started)"
            ))),
            (
                CaSource::Secret {
                    namespace,
                    name,
                    key,
                },
                Some(Watch::Secret {
                    store, reflector, ..
                }),
            ) => {
                let obj = cached(source, store, reflector, namespace, name);
                drop(r);
                let obj = obj?;
                let data = obj.data.as_ref();
                let Some(b64) = data.and_then(|d| d.get(key)) else {
                    return Err(no_key(source, data.map(|d| d.keys())));
                };
                base64_bundle(source, b64)
            }
            (
                CaSource::ConfigMap {
                    namespace,
                    name,
                    key,
                },
                Some(Watch::ConfigMap {
                    store, reflector, ..
                }),
            ) => {
                let obj = cached(source, store, reflector, namespace, name);
                drop(r);
                let obj = obj?;
                if let Some(text) = obj.data.as_ref().and_then(|d| d.get(key)) {
                    return bundle(source, text.as_bytes());
                }
                if let Some(b64) = obj.binary_data.as_ref().and_then(|d| d.get(key)) {
                    return base64_bundle(source, b64);
                }
                let keys = obj
                    .data
                    .iter()
                    .chain(obj.binary_data.iter())
                    .flat_map(|d| d.keys());
                Err(no_key(source, Some(keys)))
            }
            _ => Err(Unresolved::Pending(format!("{source}: not read yet"))),
        }
    }

    /// Records `bundle` as `name`'s (`None`: it has none now) for the expiry metric; answers
    /// the expiry when it is within `warning` and was not warned about yet.
    pub(crate) fn observe(&self, name: &str, bundle: Option<&CaBundle>) -> Option<SystemTime> {
        let warning = self.expiry_warning;
        let Some(expiry) = bundle.and_then(CaBundle::earliest_expiry) else {
            self.shared.expiry.lock().remove(name);
            self.shared.warned.lock().remove(name);
            return None;
        };
        let secs = unix_seconds(expiry);
        let first = self
            .shared
            .expiry
            .lock()
            .insert(name.to_string(), secs)
            .is_none();
        if first {
            // The polling task may be idle: it re-queues names with a bundle from now on.
            let at = {
                let mut due = self.shared.due.lock();
                let now = Instant::now();
                if due.expiry <= now {
                    due.expiry = now + EXPIRY_RECHECK;
                }
                due.expiry
            };
            if let Some(t) = &*self.task.lock() {
                t.schedule(at);
            }
        }
        let soon = expiry
            .duration_since(SystemTime::now())
            .map_or(true, |left| left <= warning);
        if !soon {
            self.shared.warned.lock().remove(name);
            return None;
        }
        let mut warned = self.shared.warned.lock();
        if warned.get(name) == Some(&secs) {
            return None;
        }
        warned.insert(name.to_string(), secs);
        Some(expiry)
    }

    /// Forgets `name` (no longer desired): its source use and its metric.
    pub(crate) fn forget(&self, name: &str) {
        self.track(name, None);
        self.shared.expiry.lock().remove(name);
        self.shared.warned.lock().remove(name);
    }

    /// `autoregister_ca_bundle_expiry_timestamp_seconds{apiservice}` in the text format.
    pub(crate) fn render_metrics(&self) -> String {
        let expiry = self.shared.expiry.lock();
        let mut out = String::from(
            "# HELP autoregister_ca_bundle_expiry_timestamp_seconds When the first certificate \
             of the APIService's CA bundle expires (its earliest notAfter), Unix seconds.\n\
             # TYPE autoregister_ca_bundle_expiry_timestamp_seconds gauge\n",
        );
        for (name, secs) in expiry.iter() {
            out.push_str(&format!(
                "autoregister_ca_bundle_expiry_timestamp_seconds{{apiservice=\"{}\"}} {secs}\n",
                crate::prometheus::escape_label(name)
            ));
        }
        out
    }

    fn watch(&self, source: &CaSource) -> Watch {
        let handler = Arc::new(Requeue {
            shared: Arc::downgrade(&self.shared),
            source: source.clone(),
        });
        let opts = ReflectorOptions {
            page_size: 0,
            ..Default::default()
        };
        match source {
            CaSource::Secret {
                namespace,
                name,
                key,
            } => {
                let store = Arc::new(Store::new());
                let reflector = Reflector::spawn(
                    named::<Secret>(
                        &self.shared.client,
                        namespace,
                        name,
                        key,
                        Secret::trim_to_key,
                    ),
                    store.clone(),
                    handler,
                    opts,
                );
                Watch::Secret {
                    store,
                    reflector,
                    seen_synced: false,
                }
            }
            CaSource::ConfigMap {
                namespace,
                name,
                key,
            } => {
                let store = Arc::new(Store::new());
                let reflector = Reflector::spawn(
                    named::<ConfigMap>(
                        &self.shared.client,
                        namespace,
                        name,
                        key,
                        ConfigMap::trim_to_key,
                    ),
                    store.clone(),
                    handler,
                    opts,
                );
                Watch::ConfigMap {
                    store,
                    reflector,
                    seen_synced: false,
                }
            }
            CaSource::File(_) => Watch::File { last: None },
        }
    }
}

fn named<K: Resource>(
    client: &Client,
    namespace: &str,
    name: &str,
    key: &str,
    trim: fn(&mut K, &str),
) -> Named<K> {
    Named {
        api: Api::namespaced(client.clone(), namespace),
        namespace: namespace.to_string(),
        name: name.to_string(),
        key: key.to_string(),
        trim,
        denied: Arc::default(),
    }
}

/// The source's object from its watch's cache: pending until the first list, invalid when
/// absent.
fn cached<K: Resource>(
    source: &CaSource,
    store: &Store<K>,
    reflector: &ReflectorHandle,
    namespace: &str,
    name: &str,
) -> Result<Arc<K>, Unresolved> {
    if !store.has_synced() {
        return Err(pending(source, reflector));
    }
    store
        .get(&format!("{namespace}/{name}"))
        .ok_or_else(|| Unresolved::Invalid(format!("{source}: not found")))
}

/// The bundle in a base64 value (a Secret's data, a ConfigMap's binaryData).
fn base64_bundle(source: &CaSource, b64: &str) -> Result<CaBundle, Unresolved> {
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| Unresolved::Invalid(format!("{source}: value is not base64")))?;
    bundle(source, &pem)
}

fn pending(source: &CaSource, reflector: &ReflectorHandle) -> Unresolved {
    Unresolved::Pending(match reflector.last_error() {
        Some(e) => format!("{source}: cannot be read: {e}"),
        None => format!("{source}: not read yet"),
    })
}

fn no_key<'a>(source: &CaSource, keys: Option<impl Iterator<Item = &'a String>>) -> Unresolved {
    super::plan::missing_key(source, keys.into_iter().flatten())
}

fn bundle(source: &CaSource, pem: &[u8]) -> Result<CaBundle, Unresolved> {
    CaBundle::from_pem(pem).map_err(|e| Unresolved::Invalid(format!("{source}: {e}")))
}

/// Reads a file source now (following symlinks, so a kubelet `..data` swap is seen whole).
pub(crate) fn read_file(source: &CaSource, path: &std::path::Path) -> Result<CaBundle, Unresolved> {
    match std::fs::read(path) {
        Ok(pem) => bundle(source, &pem),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Unresolved::Invalid(format!("{source}: not found")))
        }
        Err(e) => Err(Unresolved::Invalid(format!("{source}: cannot read: {e}"))),
    }
}

fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// Re-queues the users of a source whose first read finished, of a file that changed,
/// and (every [`EXPIRY_RECHECK`]) of every bundle, until stopped.
/// The polling task: reports a source's first read, reads files for changes, and re-queues
/// names with a bundle now and then (an expiry warning fires even when nothing changes).
struct Poll(Arc<Shared>);

impl Task for Poll {
    fn fire(&self, now: Instant) -> Option<Instant> {
        let shared = &self.0;
        let (poll_files, expiry_due) = {
            let mut due = shared.due.lock();
            let poll_files = now >= due.file_poll;
            if poll_files {
                due.file_poll = now + FILE_POLL;
            }
            let expiry_due = now >= due.expiry;
            if expiry_due {
                due.expiry = now + EXPIRY_RECHECK;
            }
            (poll_files, expiry_due)
        };
        let mut changed: Vec<CaSource> = Vec::new();
        let mut outstanding = false;
        let any_watch = {
            let mut r = shared.registry.lock();
            for (source, w) in r.watches.iter_mut() {
                match w {
                    Watch::Secret {
                        store, seen_synced, ..
                    } if !*seen_synced && store.has_synced() => {
                        *seen_synced = true;
                        changed.push(source.clone());
                    }
                    Watch::ConfigMap {
                        store, seen_synced, ..
                    } if !*seen_synced && store.has_synced() => {
                        *seen_synced = true;
                        changed.push(source.clone());
                    }
                    Watch::Secret { seen_synced, .. } | Watch::ConfigMap { seen_synced, .. } => {
                        outstanding |= !*seen_synced;
                    }
                    Watch::File { .. } => {}
                }
            }
            !r.watches.is_empty()
        };
        if poll_files {
            let files: Vec<CaSource> = {
                let r = shared.registry.lock();
                r.watches
                    .iter()
                    .filter(|(_, w)| matches!(w, Watch::File { .. }))
                    .map(|(s, _)| s.clone())
                    .collect()
            };
            for source in files {
                let CaSource::File(path) = &source else {
                    continue;
                };
                // Read outside the lock: a hung file system must not stall the workers.
                let now_read = std::fs::read(path).map_err(|e| e.kind());
                let mut r = shared.registry.lock();
                if let Some(Watch::File { last }) = r.watches.get_mut(&source) {
                    if last.as_ref() != Some(&now_read) {
                        if last.is_some() {
                            log::info!("{source}: changed");
                        }
                        *last = Some(now_read);
                        changed.push(source.clone());
                    }
                }
            }
        }
        let bundles = !shared.expiry.lock().is_empty();
        if expiry_due {
            let names: Vec<String> = shared.expiry.lock().keys().cloned().collect();
            for n in names {
                shared.queue.add(n);
            }
        }
        for s in changed {
            shared.requeue(&s);
        }
        // A source added meanwhile schedules this at once; its users' own retries (per-name
        // backoff from 5 ms) usually read it first anyway. Nothing to watch and no bundle to
        // recheck: idle until a source or a bundle appears.
        let due = shared.due.lock();
        match (any_watch, bundles) {
            (true, _) if outstanding => Some(now + TICK),
            (true, true) => Some(due.file_poll.min(due.expiry)),
            (true, false) => Some(due.file_poll),
            (false, true) => Some(due.expiry),
            (false, false) => None,
        }
    }
}

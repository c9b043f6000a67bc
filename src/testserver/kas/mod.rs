//! kube-apiserver mode: the built-in local APIServices and kube-apiserver's own autoregister.
//!
//! A real kube-apiserver runs kube-aggregator's autoregister controller over the label
//! `kube-aggregator.kubernetes.io/automanaged`, with a desired set of its own: every built-in
//! group version (synced on start, label `onstart`) and every CRD group version (synced
//! always, label `true`). This module is that controller inside the test server: one thread
//! woken by every store change (and by changes to its desired set), deciding per name with
//! upstream's table ([`rules::decide`]) and writing through the same store code paths as API
//! requests, so watches see its writes. It also plays the available controller for its own
//! local APIServices (status `Available=True`, reason `Local`).
//!
//! Its writes use the manager `kube-apiserver` (as the real loopback client's User-Agent
//! gives) and are not in the request log, which holds client requests only; they are kept in
//! their own list ([`KubeApiserverWrite`]).

mod availability;
mod builtins;
mod discovery_check;
mod prober;
mod rules;
mod writes;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use serde_json::{json, Value};

use super::server::Shared;

pub(crate) use rules::LABEL;
use rules::{Action, Desired, Facts, Mode};
use writes::{create, delete, mark_available, needs_available, update};

/// The field manager of kube-apiserver's own writes.
pub const KUBE_APISERVER_MANAGER: &str = "kube-apiserver";

/// How long a start or restart waits for the first pass (the real server's readiness waits
/// for its built-in APIServices the same way).
const FIRST_PASS_TIMEOUT: Duration = Duration::from_secs(10);

/// Without a change, a pass that met an error is retried after this long.
const RETRY_AFTER_ERROR: Duration = Duration::from_millis(200);

/// One write kube-apiserver's autoregister (or available) controller made.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct KubeApiserverWrite {
    /// `create`, `update`, `delete`, or `status` (the available condition).
    pub verb: String,
    /// The APIService's name.
    pub name: String,
    /// The table cell the decision came from (`2B`, `6A`, …; `status` for a status write).
    pub cell: String,
    /// The HTTP code the write would have answered (201, 200, 404, 409, …).
    pub code: u16,
}

/// Names of the built-in APIServices kube-apiserver registers (`v1.`, `v1.apps`, …), sorted.
pub fn builtin_apiservices() -> Vec<String> {
    let mut names: Vec<String> = builtins::BUILTIN_APISERVICES
        .iter()
        .map(|(g, v, _, _)| format!("{v}.{g}"))
        .collect();
    names.sort();
    names
}

/// The kube-apiserver side of the test server.
pub(crate) struct KubeApiserver {
    desired: Mutex<BTreeMap<String, Desired>>,
    /// Bumped on every change of `desired`, so the thread notices it.
    generation: AtomicU64,
    writes: Mutex<Vec<KubeApiserverWrite>>,
    /// `(epoch, generation)` of the last finished pass.
    last_pass: Mutex<Option<(u64, u64)>>,
    pass_done: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// kube-aggregator's availability controller: its memory and discovery checks.
    availability: availability::Availability,
    /// The thread re-running the discovery checks.
    prober: Mutex<Option<JoinHandle<()>>>,
}

fn crd_desired(group: &str, version: &str) -> (String, Desired) {
    (
        format!("{version}.{group}"),
        Desired {
            spec: json!({
                "group": group,
                "version": version,
                "groupPriorityMinimum": builtins::CRD_GROUP_PRIORITY_MINIMUM,
                "versionPriority": builtins::CRD_VERSION_PRIORITY,
            }),
            mode: Mode::Always,
        },
    )
}

impl KubeApiserver {
    /// The built-ins plus `crd_groups` (`(group, version)`) as the desired set.
    pub(crate) fn new(crd_groups: &[(String, String)]) -> Self {
        let mut desired = BTreeMap::new();
        for (g, v, gpm, vp) in builtins::BUILTIN_APISERVICES {
            desired.insert(
                format!("{v}.{g}"),
                Desired {
                    spec: json!({
                        "group": g,
                        "version": v,
                        "groupPriorityMinimum": gpm,
                        "versionPriority": vp,
                    }),
                    mode: Mode::OnStart,
                },
            );
        }
        for (g, v) in crd_groups {
            let (name, d) = crd_desired(g, v);
            desired.insert(name, d);
        }
        KubeApiserver {
            desired: Mutex::new(desired),
            generation: AtomicU64::new(0),
            writes: Mutex::new(Vec::new()),
            last_pass: Mutex::new(None),
            pass_done: Condvar::new(),
            thread: Mutex::new(None),
            availability: availability::Availability::default(),
            prober: Mutex::new(None),
        }
    }

    /// Starts the controller thread and waits for its first pass (the built-ins exist then).
    pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<()> {
        let Some(kas) = shared.kas.as_ref() else {
            return Ok(());
        };
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("testserver-kube-apiserver".into())
            .spawn(move || run(&s))?;
        *kas.thread.lock() = Some(handle);
        let weak = Arc::downgrade(shared);
        let prober = std::thread::Builder::new()
            .name("testserver-discovery".into())
            .spawn(move || {
                if let Some(kas) = weak.upgrade().as_ref().and_then(|s| s.kas.as_ref()) {
                    kas.availability.prober.run(&weak);
                }
            })?;
        *kas.prober.lock() = Some(prober);
        kas.wait_pass(0);
        Ok(())
    }

    /// Makes the thread run a pass (a discovery check's result changed).
    pub(crate) fn poke(&self, shared: &Shared) {
        // Bumped under the store lock, as in `set_crd_group`.
        {
            let _st = shared.store.state.lock();
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        shared.store.changed.notify_all();
    }

    /// Waits (bounded) until a pass of `epoch` or later, seeing the current desired set, ended.
    pub(crate) fn wait_pass(&self, epoch: u64) {
        let generation = self.generation.load(Ordering::SeqCst);
        let deadline = crate::runtime::clock::deadline_after(Instant::now(), FIRST_PASS_TIMEOUT);
        let mut last = self.last_pass.lock();
        while !last.is_some_and(|(e, g)| e >= epoch && g >= generation) {
            if self.pass_done.wait_until(&mut last, deadline).timed_out() {
                log::warn!("test server: kube-apiserver's autoregister pass did not finish");
                return;
            }
        }
    }

    /// Adds (`present`) or removes a CRD group's APIService from the desired set; returns once
    /// a pass has seen the change.
    pub(crate) fn set_crd_group(&self, shared: &Shared, group: &str, version: &str, present: bool) {
        let (name, d) = crd_desired(group, version);
        {
            let mut desired = self.desired.lock();
            if present {
                desired.insert(name, d);
            } else {
                desired.remove(&name);
            }
        }
        // Bump under the store lock: the thread checks the generation under it and then waits
        // on the store's condition variable, so the wake-up cannot fall between the two.
        let epoch = {
            let st = shared.store.state.lock();
            self.generation.fetch_add(1, Ordering::SeqCst);
            st.epoch
        };
        shared.store.changed.notify_all();
        self.wait_pass(epoch);
    }

    /// Every write so far, oldest first.
    pub(crate) fn writes(&self) -> Vec<KubeApiserverWrite> {
        self.writes.lock().clone()
    }

    /// Joins the threads (after the store was shut down); discovery checks in flight end
    /// on their own within their timeout.
    pub(crate) fn join(&self) {
        self.availability.prober.stop();
        for t in [self.thread.lock().take(), self.prober.lock().take()]
            .into_iter()
            .flatten()
        {
            let _ = t.join();
        }
    }
}

/// Per-process memory of the controller: reset by every restart, as a new process starts.
#[derive(Default)]
struct ProcessState {
    epoch: Option<u64>,
    synced: HashSet<String>,
    at_start: HashSet<String>,
}

fn run(shared: &Arc<Shared>) {
    let Some(kas) = shared.kas.as_ref() else {
        return;
    };
    let mut seen: Option<(u64, u64, u64)> = None;
    let mut proc = ProcessState::default();
    let mut retry = false;
    loop {
        let (epoch, generation, current) = {
            let mut st = shared.store.state.lock();
            let wait_from = Instant::now();
            loop {
                if st.shutdown {
                    return;
                }
                let now = (st.rv, st.epoch, kas.generation.load(Ordering::SeqCst));
                if seen != Some(now) || (retry && wait_from.elapsed() >= RETRY_AFTER_ERROR) {
                    seen = Some(now);
                    break;
                }
                let wait = if retry {
                    RETRY_AFTER_ERROR
                } else {
                    Duration::from_secs(1)
                };
                shared.store.wait(&mut st, wait);
            }
            let current: BTreeMap<String, Arc<Value>> = st
                .objects
                .iter()
                .filter(|((p, _, _), _)| *p == "apiservices")
                .map(|((_, _, n), o)| (n.clone(), o.clone()))
                .collect();
            let generation = kas.generation.load(Ordering::SeqCst);
            (st.epoch, generation, current)
        };
        if proc.epoch != Some(epoch) {
            // A (re)started kube-apiserver: nothing synced yet; remember what carried
            // `onstart` at start, for upstream's rows 4 and 5.
            proc = ProcessState {
                epoch: Some(epoch),
                synced: HashSet::new(),
                at_start: current
                    .iter()
                    .filter(|(_, o)| label_of(o) == Some(rules::ON_START))
                    .map(|(n, _)| n.clone())
                    .collect(),
            };
        }
        let desired = kas.desired.lock().clone();
        retry = pass(shared, kas, &mut proc, &desired, &current);
        // kube-aggregator's availability controller, for APIServices backed by a Service.
        retry |= availability::pass(shared, &Arc::downgrade(shared), &kas.availability);
        *kas.last_pass.lock() = Some((epoch, generation));
        kas.pass_done.notify_all();
    }
}

pub(super) fn label_of(o: &Value) -> Option<&str> {
    o.pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL))
        .and_then(Value::as_str)
}

/// One sync of every name; returns whether a write failed (and should be retried).
fn pass(
    shared: &Shared,
    kas: &KubeApiserver,
    proc: &mut ProcessState,
    desired: &BTreeMap<String, Desired>,
    current: &BTreeMap<String, Arc<Value>>,
) -> bool {
    let names: BTreeSet<&String> = desired.keys().chain(current.keys()).collect();
    let mut failed = false;
    for name in names {
        let d = desired.get(name);
        let cur = current.get(name).map(|o| o.as_ref());
        let (action, cell) = rules::decide(&Facts {
            desired: d,
            current: cur,
            synced: proc.synced.contains(name),
            at_start: proc.at_start.contains(name),
        });
        let result = match (&action, d, cur) {
            (Action::None, _, _) => None,
            (Action::Create, Some(d), _) => {
                let r = create(shared, name, d);
                if r.is_ok() {
                    // The available controller reacts at once; doing it here means a start
                    // or restart returns with every built-in complete.
                    available(shared, kas, name);
                }
                Some(("create", r))
            }
            (Action::Update, Some(d), Some(cur)) => Some(("update", update(shared, name, d, cur))),
            (Action::Delete(uid), _, _) => Some(("delete", delete(shared, name, uid))),
            // decide() only creates or updates a desired name, and updates a present one.
            _ => None,
        };
        let ok = match result {
            None => true,
            Some((verb, r)) => {
                let code = match &r {
                    Ok(c) => *c,
                    Err(e) => e.code(),
                };
                kas.writes.lock().push(KubeApiserverWrite {
                    verb: verb.into(),
                    name: name.clone(),
                    cell: cell.clone(),
                    code,
                });
                // Upstream returns nil on these: a later event brings the name back.
                r.is_ok() || matches!(code, 404 | 409)
            }
        };
        if ok {
            proc.synced.insert(name.clone());
        } else {
            failed = true;
        }
    }
    for (name, d) in desired {
        if current.get(name).is_some_and(|cur| needs_available(cur, d)) {
            failed |= !available(shared, kas, name);
        }
    }
    failed
}

/// Sets `Available=True` on `name` and logs it; false when that failed for a reason to retry.
fn available(shared: &Shared, kas: &KubeApiserver, name: &str) -> bool {
    let r = mark_available(shared, name);
    let code = r.as_ref().map_or_else(|e| e.code(), |c| *c);
    kas.writes.lock().push(KubeApiserverWrite {
        verb: "status".into(),
        name: name.to_string(),
        cell: "status".into(),
        code,
    });
    r.is_ok() || matches!(code, 404 | 409)
}

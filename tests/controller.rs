//! The library handle `Controller` against the in-process test API server on loopback: the
//! upstream `TestSync` cases about sequences and bookkeeping that the pure decision tests
//! cannot show (duplicate calls, synced-once after success, what a removal touches, no-op
//! syncs, spec-only updates), waiting, and thread hygiene of start/shutdown.
#![cfg(feature = "testing")]

use std::collections::BTreeSet;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use autoregister::api::{APIService, APIServiceSpec, ServiceReference};
use autoregister::client::{Client, Config};
use autoregister::controller::{Controller, ControllerOptions};
use autoregister::testserver::TestServer;
use serde_json::{json, Value};

const LABEL: &str = autoregister::api::DEFAULT_LABEL_KEY;
const WAIT: Duration = Duration::from_secs(5);
const SENTINEL: &str = "v1.sentinel.example.com";

// The handle is a cheap shared reference: cloneable and usable from any thread.
const _: fn() = || {
    fn assert_handle<T: Clone + Send + Sync + 'static>() {}
    assert_handle::<Controller>();
};

/// Tests that start controllers hold this shared; the thread-hygiene test holds it
/// exclusively, so the controller threads it sees are its own.
static THREADS: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    THREADS.read().unwrap_or_else(|e| e.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    THREADS.write().unwrap_or_else(|e| e.into_inner())
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn spec(group: &str, priority: i32) -> APIServiceSpec {
    APIServiceSpec {
        service: Some(ServiceReference {
            namespace: "ns".into(),
            name: "svc".into(),
            port: Some(443),
            ..Default::default()
        }),
        group: group.into(),
        version: "v1".into(),
        insecure_skip_tls_verify: true,
        group_priority_minimum: 100,
        version_priority: priority,
        ..Default::default()
    }
}

/// The desired object `v1.<group>`.
fn svc(group: &str, priority: i32) -> APIService {
    APIService::new(format!("v1.{group}"), spec(group, priority))
}

/// The stored form of `svc(group, priority)`, with the automanaged label `mode` if any.
fn object(group: &str, mode: Option<&str>, priority: i32) -> Value {
    let mut v = json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": format!("v1.{group}")},
        "spec": serde_json::to_value(spec(group, priority)).unwrap(),
    });
    if let Some(m) = mode {
        v["metadata"]["labels"] = json!({ LABEL: m });
    }
    v
}

/// A test server, a controller on it (one worker unless set otherwise: names are then
/// processed in queue order), and shutdown on drop even when the test fails.
struct Harness {
    ctl: Controller,
    server: TestServer,
    sentinel: bool,
    _guard: RwLockReadGuard<'static, ()>,
}

impl Harness {
    fn new() -> Harness {
        Harness::with_workers(1)
    }

    fn with_workers(workers: usize) -> Harness {
        let guard = shared();
        let server = TestServer::start();
        let mut options = ControllerOptions::new(LABEL);
        options.workers = workers;
        // Upstream's semantics: removing the last entry deregisters it. The guard
        // against that has tests of its own.
        options.allow_empty = true;
        let ctl = Controller::new(Client::new(server.client_config()).unwrap(), options);
        Harness {
            ctl,
            server,
            sentinel: false,
            _guard: guard,
        }
    }

    fn start(&self) {
        self.ctl.start();
        assert!(self.ctl.wait_until_synced(WAIT), "cache never synced");
    }

    fn converge(&self) {
        if let Err(pending) = self.ctl.wait_converged(WAIT) {
            panic!("did not converge: {pending:?}");
        }
    }

    fn stored(&self, name: &str) -> Option<Value> {
        self.server.get_object("apiservices", None, name)
    }

    fn priority(&self, name: &str) -> Option<i64> {
        self.stored(name)
            .and_then(|o| o["spec"]["versionPriority"].as_i64())
    }

    /// Writes the server answered for `name`, as `verb code`.
    fn writes(&self, name: &str) -> Vec<String> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| {
                r.name.as_deref() == Some(name)
                    && matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete")
            })
            .map(|r| format!("{} {}", r.verb, r.code))
            .collect()
    }

    /// Returns once every name enqueued so far, and every watch event the server has sent so
    /// far, has been processed. Needs one worker: a continuous sentinel is deleted behind the
    /// controller's back; its delete event is queued behind everything before it, so its
    /// re-creation means the queue has been worked through up to that point.
    fn quiesce(&mut self) {
        if !self.sentinel {
            self.sentinel = true;
            self.ctl
                .add_api_service_to_sync(svc("sentinel.example.com", 1));
            wait_until("the sentinel exists", || self.stored(SENTINEL).is_some());
        }
        let old = self
            .server
            .delete_object("apiservices", None, SENTINEL)
            .unwrap();
        let old_uid = old["metadata"]["uid"].clone();
        wait_until("the sentinel is re-created", || {
            self.stored(SENTINEL)
                .is_some_and(|o| o["metadata"]["uid"] != old_uid)
        });
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.ctl.shutdown();
    }
}

#[test]
fn duplicate_adds_and_removes_before_start_collapse() {
    let mut h = Harness::new();
    h.server.seed(
        "apiservices",
        None,
        object("c.example.com", Some("true"), 7),
    );
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.ctl
        .add_api_service_to_sync_on_start(svc("b.example.com", 11));
    h.ctl
        .add_api_service_to_sync_on_start(svc("b.example.com", 11));
    h.ctl.remove_api_service_to_sync("v1.c.example.com");
    h.ctl.remove_api_service_to_sync("v1.c.example.com");
    // Removing a name that was never desired nor exists is harmless too.
    h.ctl.remove_api_service_to_sync("v1.nothing.example.com");
    h.start();
    h.converge();
    h.quiesce();
    assert_eq!(h.writes("v1.a.example.com"), ["create 201"]);
    assert_eq!(h.writes("v1.b.example.com"), ["create 201"]);
    assert_eq!(h.writes("v1.c.example.com"), ["delete 200"]);
    assert!(h.writes("v1.nothing.example.com").is_empty());
    assert!(h.stored("v1.c.example.com").is_none());
}

#[test]
fn duplicate_adds_and_removes_while_running_write_once() {
    let mut h = Harness::with_workers(2);
    h.start();
    let name = "v1.a.example.com";
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.converge();
    wait_until("a exists", || h.stored(name).is_some());
    h.ctl.remove_api_service_to_sync(name);
    h.ctl.remove_api_service_to_sync(name);
    wait_until("a is deleted", || h.stored(name).is_none());
    h.converge();
    h.quiesce();
    // A duplicate processed before the cache saw our own write may repeat it; the server
    // then answers AlreadyExists/NotFound, which is benign. Exactly one of each succeeded.
    let writes = h.writes(name);
    let count = |w: &str| writes.iter().filter(|x| *x == w).count();
    assert_eq!(count("create 201"), 1, "{writes:?}");
    assert_eq!(count("delete 200"), 1, "{writes:?}");
    assert!(
        writes
            .iter()
            .all(|w| ["create 201", "create 409", "delete 200", "delete 404"].contains(&w.as_str())),
        "{writes:?}"
    );
    assert!(h.stored(name).is_none());
}

#[test]
fn synced_once_is_recorded_only_after_success() {
    let mut h = Harness::new();
    let once = "v1.once.example.com";
    let always = "v1.always.example.com";
    h.server.faults().fail_next_verb(Some("create"), 1, 500);
    h.ctl
        .add_api_service_to_sync_on_start(svc("once.example.com", 10));
    h.start();
    h.converge();
    assert_eq!(
        h.writes(once),
        ["create 500", "create 201"],
        "a failed onstart create is retried"
    );
    assert_eq!(
        h.stored(once).unwrap()["metadata"]["labels"][LABEL],
        "onstart"
    );
    h.ctl.add_api_service_to_sync(svc("always.example.com", 20));
    h.converge();
    assert_eq!(h.writes(always), ["create 201"]);

    // Deleted behind our back, the onstart one first: with one worker its event is handled
    // before the continuous one's, which is re-created.
    h.server.delete_object("apiservices", None, once).unwrap();
    h.server.delete_object("apiservices", None, always).unwrap();
    wait_until("the continuous object is re-created", || {
        h.stored(always).is_some()
    });
    h.quiesce();
    assert!(h.stored(once).is_none(), "2B once: not re-created");
    assert_eq!(h.writes(once), ["create 500", "create 201"]);
    assert_eq!(h.writes(always), ["create 201", "create 201"]);
}

#[test]
fn removing_the_entry_of_an_unmanaged_object_leaves_it_alone() {
    let mut h = Harness::new();
    let name = "v1.a.example.com";
    let seeded = h
        .server
        .seed("apiservices", None, object("a.example.com", None, 99));
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.start();
    // Desired but not ours, with another spec: not converged, and the reason says whose.
    let pending = h.ctl.wait_converged(WAIT).unwrap_err();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].name, name);
    assert!(
        pending[0].reason.contains("without ownership label"),
        "{pending:?}"
    );
    h.ctl.remove_api_service_to_sync(name);
    h.quiesce();
    assert!(h.writes(name).is_empty());
    assert_eq!(h.stored(name).unwrap(), seeded, "untouched");
}

#[test]
fn removing_a_managed_continuous_entry_deletes_it_with_a_uid_precondition() {
    let h = Harness::new();
    let name = "v1.a.example.com";
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.start();
    h.converge();
    let uid = h.stored(name).unwrap()["metadata"]["uid"].clone();
    assert!(uid.is_string());
    h.ctl.remove_api_service_to_sync(name);
    wait_until("a is deleted", || h.stored(name).is_none());
    // The server logs a request after the store has changed: wait for the record too.
    let logged = || {
        h.server
            .requests()
            .into_iter()
            .find(|r| r.verb == "delete" && r.name.as_deref() == Some(name))
    };
    wait_until("the delete is logged", || logged().is_some());
    let delete = logged().unwrap();
    assert_eq!(delete.code, 200);
    assert_eq!(delete.body.unwrap()["preconditions"]["uid"], uid);
    // A watch event still in flight may requeue the name before the DELETED event reaches
    // the cache (informer lag, as upstream): a repeat delete is answered 404, harmlessly.
    let writes = h.writes(name);
    assert_eq!(writes[..2], ["create 201", "delete 200"], "{writes:?}");
    assert!(writes[2..].iter().all(|w| w == "delete 404"), "{writes:?}");
}

/// tests/embed.rs under make soak: a removal while our create was on its way found nothing
/// to delete (the cache did not show the object yet, and the create was noted only on its
/// answer), so `wait_converged` said done and the object stayed registered.
#[test]
fn a_removal_while_our_create_is_on_its_way_waits_for_the_object_and_deletes_it() {
    let h = Harness::new();
    h.start();
    let name = "v1.a.example.com";
    // The create is held inside the server once it has arrived, until released.
    let (arrived_tx, arrived) = std::sync::mpsc::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let hold = std::sync::Mutex::new(Some((arrived_tx, released)));
    h.server
        .set_admission(Some(std::sync::Arc::new(move |plural: &str, _: &Value| {
            let first = (plural == "apiservices")
                .then(|| hold.lock().unwrap().take())
                .flatten();
            if let Some((arrived, released)) = first {
                let _ = arrived.send(());
                let _ = released.recv_timeout(WAIT * 2);
            }
            None
        })));
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    arrived
        .recv_timeout(WAIT)
        .expect("the create never arrived");
    h.ctl.remove_api_service_to_sync(name);
    // Not done while the create that makes the object has no answer.
    let early = h.ctl.wait_converged(Duration::from_millis(300));
    assert!(early.is_err(), "converged with our create on its way");
    release.send(()).unwrap();
    h.converge();
    assert!(h.stored(name).is_none(), "{:?}", h.writes(name));
    assert_eq!(h.writes(name)[..2], ["create 201", "delete 200"]);
}

/// Chaos seeds 1217, 1289, 3415: a delete answered 404 (someone deleted the object while
/// the watch was down) was retried with backoff until the cache caught up. The watch brings
/// the deletion; a retry waits at least 1 s.
#[test]
fn a_delete_answered_not_found_while_the_cache_lags_is_not_retried_at_once() {
    let mut h = Harness::new();
    let name = "v1.a.example.com";
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.start();
    h.converge();
    // The create's own watch event syncs the name once more; were that sync still queued,
    // it would send a second delete of its own (a new decision, not a retry).
    h.quiesce();
    // The watch goes silent, then the object is deleted behind the controller's back.
    h.server.faults().stall_watches(true);
    h.server.delete_object("apiservices", None, name).unwrap();
    h.ctl.remove_api_service_to_sync(name);
    wait_until("the delete is answered", || h.writes(name).len() == 2);
    // The retries this replaces came 5, 10, 20, 40 ms apart; a stale-cache answer now waits
    // at least 1 s: none may follow within 300 ms (an absence: no condition to await).
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(h.writes(name), ["create 201", "delete 404"]);
    h.server.faults().stall_watches(false);
}

/// Chaos seed 258: a create answered AlreadyExists (someone created the name while the
/// watch was down) was retried with backoff until the cache caught up. The watch brings
/// that object, and its event decides the name again; a retry waits at least 1 s.
#[test]
fn a_create_answered_already_exists_while_the_cache_lags_is_not_retried_at_once() {
    let h = Harness::new();
    h.start();
    let name = "v1.b.example.com";
    h.server.faults().stall_watches(true);
    h.server
        .seed("apiservices", None, object("b.example.com", None, 5));
    h.ctl.add_api_service_to_sync(svc("b.example.com", 10));
    wait_until("the create is answered", || !h.writes(name).is_empty());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(h.writes(name), ["create 409"]);
    // Once the watch flows, the object is seen as someone else's and left alone.
    h.server.faults().stall_watches(false);
    wait_until("it is held as not ours", || {
        matches!(h.ctl.wait_converged(Duration::ZERO),
                 Err(p) if p.iter().any(|p| p.name == name && p.blocked))
    });
    assert_eq!(h.writes(name), ["create 409"]);
    assert_eq!(h.priority(name), Some(5));
}

#[test]
fn adding_an_object_already_present_managed_and_equal_writes_nothing() {
    let mut h = Harness::new();
    let name = "v1.a.example.com";
    h.server.seed(
        "apiservices",
        None,
        object("a.example.com", Some("true"), 10),
    );
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.start();
    h.converge();
    // And again while running: still equal, still nothing to write.
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.quiesce();
    assert!(h.writes(name).is_empty(), "{:?}", h.writes(name));
}

#[test]
fn changing_the_desired_spec_applies_only_the_declared_fields() {
    let h = Harness::new();
    let name = "v1.a.example.com";
    let mut seeded = object("a.example.com", Some("true"), 10);
    let extra = json!({
        "labels": {LABEL: "true", "team": "storage"},
        "annotations": {"note": "kept"},
        "finalizers": ["example.com/hold"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u-1"}],
        "futureMetaField": {"x": 1},
    });
    for (k, v) in extra.as_object().unwrap() {
        seeded["metadata"][k] = v.clone();
    }
    seeded["futureTopLevel"] = json!({"kept": true});
    seeded["status"] = json!({"conditions": [{"type": "Available", "status": "True"}]});
    h.server.seed("apiservices", None, seeded);
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.start();
    h.converge();
    let before = h.stored(name).unwrap();
    assert!(h.writes(name).is_empty(), "equal spec: no write");

    h.ctl.add_api_service_to_sync(svc("a.example.com", 42));
    wait_until("the spec is updated", || h.priority(name) == Some(42));
    // The test server logs a request after applying it: wait for the record too.
    wait_until("the update is logged", || !h.writes(name).is_empty());
    assert_eq!(h.writes(name), ["patch 200"]);
    let after = h.stored(name).unwrap();
    assert_eq!(
        after["spec"],
        serde_json::to_value(spec("a.example.com", 42)).unwrap()
    );
    for (k, v) in extra.as_object().unwrap() {
        assert_eq!(&after["metadata"][k], v, "metadata.{k} survives");
    }
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(after["futureTopLevel"], json!({"kept": true}));
    assert_eq!(after["status"], before["status"]);

    // What we sent: a server-side apply of the declared fields only (and the object's
    // UID, so it reaches that object or none), forced.
    let apply = h
        .server
        .requests()
        .into_iter()
        .find(|r| r.verb == "patch" && r.name.as_deref() == Some(name))
        .unwrap();
    assert_eq!(
        apply.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert!(
        apply.query.split('&').any(|kv| kv == "force=true"),
        "{}",
        apply.query
    );
    // Named by the program (here the test binary), as every write of ours.
    assert!(apply.field_manager.is_some_and(|m| !m.is_empty()));
    assert_eq!(
        apply.body.unwrap(),
        json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name, "uid": before["metadata"]["uid"], "labels": {LABEL: "true"}},
            "spec": serde_json::to_value(spec("a.example.com", 42)).unwrap(),
        })
    );
}

#[test]
fn an_apply_leaves_other_managers_entries_to_them() {
    let h = Harness::new();
    let name = "v1.a.example.com";
    let mut seeded = object("a.example.com", Some("true"), 10);
    seeded["metadata"]["annotations"] = json!({"note": "helm's"});
    let helm = json!({
        "manager": "helm", "operation": "Update", "apiVersion": "apiregistration.k8s.io/v1",
        "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {"f:note": {}}}},
    });
    seeded["metadata"]["managedFields"] = json!([helm.clone()]);
    h.server.seed("apiservices", None, seeded);
    h.ctl.add_api_service_to_sync(svc("a.example.com", 42));
    h.start();
    wait_until("the spec is updated", || h.priority(name) == Some(42));
    wait_until("the update is logged", || !h.writes(name).is_empty());
    // An apply sends no managedFields (the server refuses them in one): it keeps its own
    // and records ours beside them.
    let update = h
        .server
        .requests()
        .into_iter()
        .find(|r| r.verb == "patch" && r.name.as_deref() == Some(name))
        .unwrap();
    let sent = update.body.unwrap();
    assert!(
        sent["metadata"].get("managedFields").is_none(),
        "sent: {sent}"
    );
    assert_eq!(sent["apiVersion"], "apiregistration.k8s.io/v1");
    assert_eq!(sent["kind"], "APIService");
    let after = h.stored(name).unwrap();
    let entries = after["metadata"]["managedFields"].as_array().unwrap();
    assert!(entries.contains(&helm), "helm's entry kept whole: {after}");
    assert!(
        entries.iter().any(|e| e["manager"] != "helm"
            && e["operation"] == "Apply"
            && e["fieldsV1"]["f:spec"]["f:versionPriority"].is_object()),
        "our apply is recorded beside it: {after}"
    );
}

#[test]
fn wait_until_synced_is_true_after_start() {
    let h = Harness::new();
    h.ctl.start();
    assert!(h.ctl.wait_until_synced(WAIT));
    // Once synced it stays synced; a zero timeout answers at once.
    assert!(h.ctl.wait_until_synced(Duration::ZERO));
}

#[test]
fn wait_until_synced_times_out_while_the_server_does_not_answer() {
    let h = Harness::new();
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.server.faults().pause();
    h.ctl.start();
    let t = Instant::now();
    assert!(!h.ctl.wait_until_synced(Duration::from_millis(300)));
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    let pending = h
        .ctl
        .wait_converged(Duration::from_millis(100))
        .unwrap_err();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].name, "v1.a.example.com");
    // The paused server has not failed: it has not answered yet.
    assert!(
        pending[0].reason.contains("had not synced yet"),
        "{pending:?}"
    );
    h.server.faults().resume();
    assert!(h.ctl.wait_until_synced(WAIT));
    h.converge();
}

#[test]
fn wait_until_synced_times_out_on_a_closed_port_and_shutdown_is_prompt() {
    let _guard = shared();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut config = Config::new(format!("http://127.0.0.1:{port}"));
    config.qps = 0.0;
    let ctl = Controller::new(Client::new(config).unwrap(), ControllerOptions::new(LABEL));
    ctl.add_api_service_to_sync(svc("a.example.com", 10));
    ctl.start();
    let t = Instant::now();
    assert!(!ctl.wait_until_synced(Duration::from_millis(300)));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let pending = ctl.wait_converged(Duration::from_millis(50)).unwrap_err();
    assert_eq!(
        pending.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["v1.a.example.com"]
    );
    // The reflector is in its error backoff: shutdown must not wait it out.
    let t = Instant::now();
    ctl.shutdown();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

#[test]
fn wait_converged_reports_pending_names_with_their_last_error() {
    let h = Harness::new();
    let name = "v1.a.example.com";
    h.server
        .faults()
        .fail_next_verb(Some("create"), 10_000, 500);
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.start();
    wait_until("a create failed", || !h.writes(name).is_empty());
    let pending = h
        .ctl
        .wait_converged(Duration::from_millis(200))
        .unwrap_err();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].name, name);
    assert!(
        pending[0].reason.contains("create") && pending[0].reason.contains("500"),
        "{pending:?}"
    );
    // Recovery: the per-key backoff is still short, the next retry succeeds.
    h.server.faults().clear();
    h.converge();
    assert!(h.writes(name).ends_with(&["create 201".to_string()]));
    assert!(h.stored(name).is_some());
}

#[test]
fn registration_from_several_threads_at_once() {
    let h = Harness::with_workers(4);
    h.start();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let ctl = h.ctl.clone();
            std::thread::spawn(move || {
                for i in 0..5 {
                    let obj = svc(&format!("g{t}-{i}.example.com"), 10);
                    if i % 2 == 0 {
                        ctl.add_api_service_to_sync(obj);
                    } else {
                        ctl.add_api_service_to_sync_on_start(obj);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    h.converge();
    for t in 0..8 {
        for i in 0..5 {
            let name = format!("v1.g{t}-{i}.example.com");
            let obj = h.stored(&name).unwrap_or_else(|| panic!("{name} missing"));
            let mode = if i % 2 == 0 { "true" } else { "onstart" };
            assert_eq!(obj["metadata"]["labels"][LABEL], mode, "{name}");
            assert_eq!(h.writes(&name), ["create 201"], "{name}");
        }
    }
}

/// `(tid, comm)` of this process's threads whose names the controller and its parts use.
/// Linux truncates names to 15 bytes (`autoregister-wo`, `reflector-apise`, ...).
fn controller_threads() -> BTreeSet<(String, String)> {
    const PREFIXES: [&str; 4] = ["autoregister-", "workqueue-", "reflector-", "resync-"];
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) else {
            continue; // the thread ended while we looked
        };
        let comm = comm.trim_end().to_string();
        if PREFIXES.iter().any(|p| comm.starts_with(p)) {
            out.insert((entry.file_name().to_string_lossy().into_owned(), comm));
        }
    }
    out
}

fn names(threads: &BTreeSet<(String, String)>) -> Vec<&str> {
    threads.iter().map(|(_, c)| c.as_str()).collect()
}

/// After `pthread_join` returns, the kernel drops the thread's `/proc` entry a moment later:
/// allow that moment, no more.
fn assert_gone(what: &str) {
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let left = controller_threads();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: threads left: {:?}",
            names(&left)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn shutdown_joins_every_thread_and_is_prompt_while_the_watch_is_idle() {
    let _guard = exclusive();
    assert_gone("before the test");
    let server = TestServer::start();
    let mut options = ControllerOptions::new(LABEL);
    options.workers = 3;
    options.resync = Some(Duration::from_secs(3600));
    let ctl = Controller::new(Client::new(server.client_config()).unwrap(), options);
    ctl.add_api_service_to_sync(svc("a.example.com", 10));
    ctl.start();
    ctl.start(); // idempotent: no second set of threads
    if let Err(p) = ctl.wait_converged(WAIT) {
        panic!("did not converge: {p:?}");
    }
    wait_until("every controller thread runs", || {
        let mut n = names(&controller_threads())
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
        n.sort();
        // Workers (the first waited for the cache), the reflector, and one thread for
        // every timer (the queue's delays, the resync, the CA sources, Events).
        n == [
            "autoregister-ti",
            "autoregister-wo",
            "autoregister-wo",
            "autoregister-wo",
            "reflector-apise",
        ]
    });
    wait_until("the watch is open", || server.count("watch") >= 1);
    // A clone shuts down the same controller.
    let t = Instant::now();
    ctl.clone().shutdown();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(1), "shutdown took {took:?}");
    assert_gone("after shutdown");
    // Again, and after shutdown registration is harmless (nothing runs to act on it).
    ctl.shutdown();
    ctl.add_api_service_to_sync(svc("b.example.com", 10));
    ctl.remove_api_service_to_sync("v1.a.example.com");
    assert_gone("after a second shutdown");
    assert!(server
        .get_object("apiservices", None, "v1.b.example.com")
        .is_none());
}

#[test]
fn shutdown_without_start_joins_the_queue_timer() {
    let _guard = exclusive();
    assert_gone("before the test");
    let ctl = Controller::new(
        Client::new(Config::new("http://127.0.0.1:1")).unwrap(),
        ControllerOptions::new(LABEL),
    );
    // A new thread names itself once it runs: wait for that.
    wait_until("the queue timer runs", || {
        names(&controller_threads()) == ["autoregister-ti"]
    });
    ctl.shutdown();
    assert_gone("after shutdown");
}

#[test]
fn waiters_return_when_the_controller_shuts_down() {
    let _guard = shared();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut config = Config::new(format!("http://127.0.0.1:{port}"));
    config.qps = 0.0;
    let ctl = Controller::new(Client::new(config).unwrap(), ControllerOptions::new(LABEL));
    ctl.add_api_service_to_sync(svc("a.example.com", 10));
    ctl.start();
    let synced = {
        let ctl = ctl.clone();
        std::thread::spawn(move || ctl.wait_until_synced(Duration::from_secs(30)))
    };
    let converged = {
        let ctl = ctl.clone();
        std::thread::spawn(move || ctl.wait_converged(Duration::from_secs(30)))
    };
    ctl.shutdown();
    let t = Instant::now();
    wait_until("both waiters return", || {
        synced.is_finished() && converged.is_finished()
    });
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(!synced.join().unwrap());
    let pending = converged.join().unwrap().unwrap_err();
    assert_eq!(pending[0].name, "v1.a.example.com");
}

/// The reflector's list is cancelled on shutdown: without that, shutdown waited for the
/// client's request timeout (60 s) while an unresponsive server held the list.
#[test]
fn shutdown_is_prompt_while_the_first_list_hangs() {
    let h = Harness::new();
    h.server.faults().pause();
    h.ctl.start();
    assert!(!h.ctl.wait_until_synced(Duration::from_millis(200)));
    let t = Instant::now();
    h.ctl.shutdown();
    // Generous for a loaded machine; the bug this guards against took 60 s.
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[test]
fn start_after_shutdown_starts_nothing() {
    let _guard = exclusive();
    assert_gone("before the test");
    let server = TestServer::start();
    let ctl = Controller::new(
        Client::new(server.client_config()).unwrap(),
        ControllerOptions::new(LABEL),
    );
    ctl.add_api_service_to_sync(svc("a.example.com", 10));
    ctl.shutdown();
    ctl.start();
    assert!(!ctl.wait_until_synced(Duration::from_millis(100)));
    // An absence has no event to wait for: watch a window long enough for a reflector to
    // name itself and list a loopback server many times over.
    let window = Instant::now() + Duration::from_millis(300);
    while Instant::now() < window {
        let threads = controller_threads();
        assert!(threads.is_empty(), "{:?}", names(&threads));
        assert_eq!(server.count("list"), 0);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(server
        .get_object("apiservices", None, "v1.a.example.com")
        .is_none());
}

#[test]
fn a_throttled_write_is_retried_after_the_servers_retry_after() {
    let h = Harness::new();
    let name = "v1.a.example.com";
    h.server.faults().set_retry_after(1);
    h.server.faults().fail_next_verb(Some("create"), 1, 429);
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.start();
    h.converge();
    let creates: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create" && r.name.as_deref() == Some(name))
        .collect();
    assert_eq!(
        creates.iter().map(|r| r.code).collect::<Vec<_>>(),
        [429, 201]
    );
    let gap = creates[1].time.duration_since(creates[0].time).unwrap();
    // Not the 5 ms per-key backoff: the server asked for a second.
    assert!(gap >= Duration::from_millis(900), "retried after {gap:?}");
}

#[test]
fn an_object_without_a_name_is_ignored_and_the_rest_converges() {
    let h = Harness::new();
    let mut nameless = svc("x.example.com", 10);
    nameless.metadata.name = None;
    h.ctl.add_api_service_to_sync(nameless);
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.start();
    h.converge();
    let creates: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create")
        .collect();
    assert_eq!(creates.len(), 1, "only the named object is written");
    assert_eq!(creates[0].name.as_deref(), Some("v1.a.example.com"));
}

/// Syncs of present continuous objects of ours (cell 6C) so far, as the metrics count them.
fn syncs_of_present_objects(h: &Harness) -> Vec<String> {
    h.ctl
        .render_metrics()
        .lines()
        .filter(|l| l.starts_with("autoregister_syncs_total{") && l.contains("cell=\"6C\""))
        .map(str::to_string)
        .collect()
}

/// The add event of our own create, stored as sent, brings no sync: it would decide what
/// the create did. Nor does another writer's change of a field we do not declare. (Every
/// other test here shows that nothing else changes for them.)
#[test]
fn the_add_event_of_our_own_create_and_a_change_of_what_we_do_not_declare_bring_no_sync() {
    let mut h = Harness::new();
    let name = "v1.a.example.com";
    h.start();
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.converge();
    h.quiesce();
    assert_eq!(syncs_of_present_objects(&h), Vec::<String>::new());
    h.server
        .update_object_as("someone", "apiservices", None, name, |o| {
            o["metadata"]["annotations"] = json!({"note": "theirs"});
        })
        .unwrap();
    h.quiesce();
    assert_eq!(syncs_of_present_objects(&h), Vec::<String>::new());
    assert_eq!(h.writes(name), ["create 201"], "nothing of ours written");
}

/// A mutating admission policy changed a declared field of our create: the sync its add
/// event brings puts the field back.
#[test]
fn a_declared_field_admission_changed_on_create_is_put_back() {
    let mut h = Harness::new();
    let name = "v1.a.example.com";
    h.server.set_mutation(Some(std::sync::Arc::new(
        |plural: &str, obj: &mut Value| {
            if plural == "apiservices" && obj["metadata"]["name"] == "v1.a.example.com" {
                obj["spec"]["versionPriority"] = json!(99);
            }
        },
    )));
    h.start();
    h.ctl.add_api_service_to_sync(svc("a.example.com", 10));
    h.converge();
    wait_until("the declared priority is back", || {
        h.priority(name) == Some(10)
    });
    h.quiesce();
    assert_eq!(h.writes(name), ["create 201", "patch 200"]);
    assert_eq!(h.priority(name), Some(10));
}

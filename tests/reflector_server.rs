//! The reflector against the in-process test API server over loopback: pagination, watch
//! order, server-closed watches, 410 relists, history moving backwards, backoff, bookmarks,
//! shutdown and resync, checked through the handler's events and the server's request log.
#![cfg(feature = "testing")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::json;

use autoregister::api::{APIService, APIServiceSpec, Resource, ServiceReference};
use autoregister::client::{Api, Canceller, Client, DeleteParams, Error, ListParams, WatchParams};
use autoregister::runtime::backoff::BackoffConfig;
use autoregister::runtime::reflector::{
    EventHandler, ListerWatcher, Reflector, ReflectorHandle, ReflectorOptions, WatchEvents,
};
use autoregister::runtime::store::Store;
use autoregister::testserver::{RequestRecord, RvChange, TestServer};

const WAIT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------- fixtures

/// One handler call, as `name` and resourceVersions.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Add(String, String),
    /// `(name, old rv, new rv, old and new are the same Arc)`.
    Update(String, String, String, bool),
    Delete(String, String),
}

fn add(n: &str, rv: &str) -> Ev {
    Ev::Add(n.into(), rv.into())
}
fn update(n: &str, old: &str, new: &str) -> Ev {
    Ev::Update(n.into(), old.into(), new.into(), false)
}
fn delete(n: &str, rv: &str) -> Ev {
    Ev::Delete(n.into(), rv.into())
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Ev>>);

impl Recorder {
    fn events(&self) -> Vec<Ev> {
        self.0.lock().clone()
    }
    fn len(&self) -> usize {
        self.0.lock().len()
    }
}

fn rv(o: &APIService) -> String {
    o.resource_version().to_string()
}

impl EventHandler<APIService> for Recorder {
    fn on_add(&self, obj: &Arc<APIService>) {
        self.0.lock().push(Ev::Add(obj.name().into(), rv(obj)));
    }
    fn on_update(&self, old: &Arc<APIService>, new: &Arc<APIService>) {
        self.0.lock().push(Ev::Update(
            new.name().into(),
            rv(old),
            rv(new),
            Arc::ptr_eq(old, new),
        ));
    }
    fn on_delete(&self, obj: &Arc<APIService>) {
        self.0.lock().push(Ev::Delete(obj.name().into(), rv(obj)));
    }
}

fn name(i: &str) -> String {
    format!("v1.{i}.example.com")
}

fn spec(group: &str, priority: i32) -> APIServiceSpec {
    APIServiceSpec {
        group: group.into(),
        version: "v1".into(),
        group_priority_minimum: 1000,
        version_priority: priority,
        service: Some(ServiceReference {
            namespace: "default".into(),
            name: "svc".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Stores `v1.<g>.example.com` directly (no HTTP); `priority` tells versions apart.
/// Answers its resourceVersion.
fn seed(s: &TestServer, g: &str, priority: i32) -> String {
    let group = format!("{g}.example.com");
    let obj = s.seed(
        "apiservices",
        None,
        json!({
            "metadata": {"name": name(g)},
            "spec": {
                "group": group,
                "version": "v1",
                "groupPriorityMinimum": 1000,
                "versionPriority": priority,
                "service": {"namespace": "default", "name": "svc"}
            }
        }),
    );
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

fn api(s: &TestServer) -> Api<APIService> {
    Api::all(Client::new(s.client_config()).unwrap())
}

/// Fast, unjittered backoff: waits are exact, so spacing can be asserted.
fn fast_backoff() -> BackoffConfig {
    BackoffConfig {
        initial: Duration::from_millis(40),
        factor: 2.0,
        max: Duration::from_millis(200),
        reset_after: Duration::from_secs(120),
        jitter: 0.0,
    }
}

fn opts() -> ReflectorOptions {
    ReflectorOptions {
        backoff: fast_backoff(),
        ..Default::default()
    }
}

struct Running {
    store: Arc<Store<APIService>>,
    rec: Arc<Recorder>,
    handle: ReflectorHandle,
}

fn start(s: &TestServer, opts: ReflectorOptions) -> Running {
    start_with(api(s), opts)
}

fn start_with(lw: impl ListerWatcher<APIService>, opts: ReflectorOptions) -> Running {
    let store = Arc::new(Store::new());
    let rec = Arc::new(Recorder::default());
    let handle = Reflector::spawn(lw, store.clone(), rec.clone(), opts);
    Running { store, rec, handle }
}

impl Running {
    fn synced(&self) {
        assert!(self.store.wait_for_sync(WAIT), "the reflector never synced");
    }
    fn state(&self) -> BTreeMap<String, String> {
        self.store
            .list()
            .iter()
            .map(|o| (o.name().to_string(), rv(o)))
            .collect()
    }
    fn events_since(&self, n: usize) -> Vec<Ev> {
        self.rec.events().split_off(n)
    }
}

/// Server-side `name → resourceVersion` of every APIService.
fn server_state(s: &TestServer) -> BTreeMap<String, String> {
    s.list_objects("apiservices", None)
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_converged(s: &TestServer, r: &Running) {
    wait_for("the store to match the server", || {
        r.state() == server_state(s)
    });
}

/// Replays handler events onto a map, failing on any event that contradicts what the
/// handler was told before (an add of a known object, an update or delete of an unknown
/// one, an update whose old state is not the last delivered one).
fn replay(events: &[Ev]) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for e in events {
        match e {
            Ev::Add(n, v) => assert!(m.insert(n.clone(), v.clone()).is_none(), "{e:?}: invented"),
            Ev::Update(n, old, new, _) => {
                let have = m.get_mut(n).unwrap_or_else(|| panic!("{e:?}: unknown"));
                assert_eq!(have, old, "{e:?}: old state is not the last delivered");
                new.clone_into(have);
            }
            Ev::Delete(n, _) => assert!(m.remove(n).is_some(), "{e:?}: unknown"),
        }
    }
    m
}

// ------------------------------------------------------------- request log

fn param(r: &RequestRecord, key: &str) -> Option<String> {
    r.query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
}

/// The reflector's list and watch requests, oldest first.
fn requests(s: &TestServer, verb: &str) -> Vec<RequestRecord> {
    s.requests()
        .into_iter()
        .filter(|r| r.verb == verb && r.resource.as_deref() == Some("apiservices"))
        .collect()
}

fn watch_rvs(s: &TestServer) -> Vec<String> {
    requests(s, "watch")
        .iter()
        .map(|r| param(r, "resourceVersion").unwrap_or_default())
        .collect()
}

fn gap(a: &RequestRecord, b: &RequestRecord) -> Duration {
    b.time.duration_since(a.time).unwrap_or_default()
}

/// The waits `fast_backoff` gives for the first `n` consecutive failures.
fn expected_waits(n: usize) -> Vec<Duration> {
    let c = fast_backoff();
    (0..n)
        .map(|i| (c.initial * 2u32.pow(i as u32)).min(c.max))
        .collect()
}

/// Every gap between consecutive `reqs` is at least the backoff wait before it.
fn assert_spaced(reqs: &[RequestRecord], waits: &[Duration]) {
    // Arrival times come from the wall clock; allow for its granularity.
    let slack = Duration::from_millis(3);
    for (i, pair) in reqs.windows(2).enumerate() {
        let g = gap(&pair[0], &pair[1]);
        assert!(
            g + slack >= waits[i],
            "retry {} came {g:?} after the previous, expected at least {:?}",
            i + 1,
            waits[i]
        );
    }
}

// ---------------------------------------------------------------- tests

#[test]
fn initial_list_is_paginated_and_the_watch_starts_at_its_version() {
    let s = TestServer::start();
    let mut want = Vec::new();
    for i in 0..23 {
        let g = format!("g{i:02}");
        let v = seed(&s, &g, 10);
        want.push(add(&name(&g), &v));
    }
    let list_rv = s.resource_version().to_string();
    let r = start(
        &s,
        ReflectorOptions {
            page_size: 5,
            ..opts()
        },
    );
    r.synced();

    let lists = requests(&s, "list");
    assert_eq!(lists.len(), 5, "23 objects in pages of 5");
    for (i, l) in lists.iter().enumerate() {
        assert_eq!(l.code, 200);
        assert_eq!(param(l, "limit").as_deref(), Some("5"));
        assert_eq!(
            param(l, "continue").is_some(),
            i > 0,
            "page {i}: {}",
            l.query
        );
        // A consistent read: no resourceVersion, never served from a lagging cache.
        assert_eq!(param(l, "resourceVersion"), None);
    }
    assert_eq!(r.state(), server_state(&s));
    assert_eq!(r.rec.events(), want, "one add per object, in list order");
    wait_for("the first watch", || !requests(&s, "watch").is_empty());
    let w = &requests(&s, "watch")[0];
    assert_eq!(param(w, "resourceVersion"), Some(list_rv));
    assert_eq!(param(w, "allowWatchBookmarks").as_deref(), Some("true"));
    let t: u64 = param(w, "timeoutSeconds").unwrap().parse().unwrap();
    assert!((300..=600).contains(&t), "timeoutSeconds {t}");
}

#[test]
fn watch_events_are_applied_in_order() {
    let s = TestServer::start();
    let a_rv = seed(&s, "a", 10);
    seed(&s, "b", 10);
    let r = start(&s, opts());
    r.synced();
    wait_for("the watch", || !requests(&s, "watch").is_empty());
    let base = r.rec.len();

    let client = api(&s);
    let c = client
        .create(&APIService::new(name("c"), spec("c.example.com", 10)))
        .unwrap();
    let mut a = client.get(&name("a")).unwrap();
    a.spec.version_priority = 20;
    let a2 = client.update(&a).unwrap();
    client.delete(&name("b"), &DeleteParams::default()).unwrap();
    let b_deleted_at = s.resource_version().to_string();
    let mut c2 = c.clone();
    c2.spec.version_priority = 30;
    let c2 = client.update(&c2).unwrap();
    client.delete(&name("a"), &DeleteParams::default()).unwrap();
    let a_deleted_at = s.resource_version().to_string();

    wait_for("five watch events", || r.rec.len() >= base + 5);
    wait_converged(&s, &r);
    assert_eq!(
        r.events_since(base),
        [
            add(&name("c"), &rv(&c)),
            update(&name("a"), &a_rv, &rv(&a2)),
            // A watch delete carries the object as the server deleted it.
            delete(&name("b"), &b_deleted_at),
            update(&name("c"), &rv(&c), &rv(&c2)),
            delete(&name("a"), &a_deleted_at),
        ]
    );
    assert_eq!(replay(&r.rec.events()), server_state(&s));
    assert_eq!(requests(&s, "list").len(), 1);
}

#[test]
fn watch_closed_by_the_server_resumes_from_the_last_version_without_relist() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    s.faults()
        .close_watches_after(Some(Duration::from_millis(300)));
    seed(&s, "a", 10);
    seed(&s, "b", 10);
    let list_rv = s.resource_version().to_string();
    let r = start(&s, opts());
    r.synced();
    let c = api(&s)
        .create(&APIService::new(name("c"), spec("c.example.com", 10)))
        .unwrap();
    let c_rv = rv(&c);
    wait_for("c in the store", || r.store.get(&name("c")).is_some());
    // Several server-side closes after the one that carried c.
    wait_for("three watches from c's version", || {
        watch_rvs(&s).iter().filter(|v| **v == c_rv).count() >= 3
    });

    assert_eq!(
        requests(&s, "list").len(),
        1,
        "a closed watch is no reason to relist"
    );
    let rvs = watch_rvs(&s);
    assert_eq!(rvs[0], list_rv);
    // Each watch resumes from the newest version seen before it: the list's until c came.
    let first_c = rvs.iter().position(|v| *v == c_rv).unwrap();
    assert!(rvs[..first_c].iter().all(|v| *v == list_rv), "{rvs:?}");
    assert!(rvs[first_c..].iter().all(|v| *v == c_rv), "{rvs:?}");
    assert!(requests(&s, "watch").iter().all(|w| w.code == 200));
    assert_eq!(
        r.rec.events(),
        [
            add(&name("a"), "2"),
            add(&name("b"), "3"),
            add(&name("c"), &c_rv)
        ]
    );
}

/// Writes `v1.<g>.example.com` and waits for the watch to deliver it, so the watch is
/// streaming (past the server's fault checks, which a late watch would otherwise consume
/// after the test armed them). Answers its resourceVersion, now the reflector's.
fn through_the_watch(s: &TestServer, r: &Running, g: &str) -> String {
    let v = seed(s, g, 10);
    wait_for("an event through the watch", || {
        r.store.get(&name(g)).is_some_and(|o| rv(&o) == v)
    });
    v
}

/// Pauses the server and drops every connection, so the reflector's watch ends and its
/// next request waits; changes made until `resume` reach it only through what it does next.
fn take_offline(s: &TestServer) {
    s.faults().pause();
    s.restart(RvChange::Keep);
}

#[test]
fn a_dropped_connection_relists_with_synthetic_deletes_updates_and_adds() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    let a_rv = seed(&s, "a", 10);
    let b_rv = seed(&s, "b", 10);
    let c_rv = seed(&s, "c", 10);
    let list_rv = s.resource_version().to_string();
    let r = start(&s, opts());
    r.synced();
    let w_rv = through_the_watch(&s, &r, "w");
    let base = r.rec.len();

    take_offline(&s);
    s.delete_object("apiservices", None, &name("b")).unwrap();
    let c2_rv = seed(&s, "c", 20);
    let d_rv = seed(&s, "d", 10);
    s.faults().resume();

    // Not a resumed watch: the server we lost may not be the one that answers now.
    wait_for("a second list", || requests(&s, "list").len() == 2);
    wait_converged(&s, &r);
    assert_eq!(
        r.events_since(base),
        [
            // The delete carries the last state the cache had, not a guess.
            delete(&name("b"), &b_rv),
            update(&name("c"), &c_rv, &c2_rv),
            add(&name("d"), &d_rv),
        ],
        "nothing for the unchanged a@{a_rv} and w@{w_rv}"
    );
    assert_eq!(replay(&r.rec.events()), server_state(&s));

    // One watch until the drop (it carried w), then one from the relist's version.
    wait_for("a watch from the relist's version", || {
        watch_rvs(&s).last() == Some(&d_rv)
    });
    assert_eq!(watch_rvs(&s), [list_rv, d_rv]);
}

#[test]
fn history_overflow_while_disconnected_relists_without_losing_or_inventing_events() {
    let s = TestServer::builder()
        .history(4)
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    let mut cached = BTreeMap::new();
    for g in ["a", "b", "c", "e"] {
        cached.insert(name(g), seed(&s, g, 10));
    }
    let r = start(&s, opts());
    r.synced();
    through_the_watch(&s, &r, "w");
    let base = r.rec.len();

    take_offline(&s);
    // More writes than the history holds, so the reflector's version is compacted away.
    seed(&s, "a", 11);
    let a_rv = seed(&s, "a", 12);
    s.delete_object("apiservices", None, &name("b")).unwrap();
    // Created and deleted while away: no event may mention it.
    seed(&s, "x", 10);
    s.delete_object("apiservices", None, &name("x")).unwrap();
    let d_rv = seed(&s, "d", 10);
    let f_rv = seed(&s, "f", 10);
    let e_rv = seed(&s, "e", 20);
    let g_rv = seed(&s, "g", 10);
    s.faults().resume();

    wait_for("a second list", || requests(&s, "list").len() == 2);
    wait_converged(&s, &r);
    assert_eq!(
        r.events_since(base),
        [
            delete(&name("b"), &cached[&name("b")]),
            update(&name("a"), &cached[&name("a")], &a_rv),
            add(&name("d"), &d_rv),
            update(&name("e"), &cached[&name("e")], &e_rv),
            add(&name("f"), &f_rv),
            add(&name("g"), &g_rv),
        ],
        "c unchanged, x never seen"
    );
    assert_eq!(replay(&r.rec.events()), server_state(&s));
}

#[test]
fn history_moving_backwards_relists_from_scratch_and_converges() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    let a_rv = seed(&s, "a", 10); // 1
    let b_rv = seed(&s, "b", 10); // 2
    let c_rv = seed(&s, "c", 10); // 3
    let r = start(&s, opts());
    r.synced();
    let client = api(&s);
    let e = client
        .create(&APIService::new(name("e"), spec("e.example.com", 10)))
        .unwrap();
    let e_rv = rv(&e); // 4: the reflector's version once it sees e
    wait_for("e in the store", || r.store.get(&name("e")).is_some());
    let base = r.rec.len();

    // Changes the reflector never sees, then a restore from an older backup: the server's
    // resourceVersion goes back to 2 and every newer object is stamped 2.
    take_offline(&s);
    s.delete_object("apiservices", None, &name("b")).unwrap();
    seed(&s, "c", 20);
    seed(&s, "d", 10);
    s.restart(RvChange::Rewind(2));
    s.faults().resume();

    wait_for("a relist", || requests(&s, "list").len() == 2);
    wait_converged(&s, &r);
    assert_eq!(s.resource_version(), 2);
    assert_eq!(
        r.events_since(base),
        [
            delete(&name("b"), &b_rv),
            // Versions are reused after a restore, so even an equal one is re-delivered.
            update(&name("a"), &a_rv, &a_rv),
            update(&name("c"), &c_rv, "2"),
            add(&name("d"), "2"),
            update(&name("e"), &e_rv, "2"),
        ]
    );
    assert_eq!(replay(&r.rec.events()), server_state(&s));

    // Watching again from the restored server's version, and events flow.
    wait_for("a watch from the relist's version", || {
        watch_rvs(&s).last().map(String::as_str) == Some("2")
    });
    let f = client
        .create(&APIService::new(name("f"), spec("f.example.com", 10)))
        .unwrap();
    wait_for("f in the store", || r.store.get(&name("f")).is_some());
    assert_eq!(r.events_since(base + 5), [add(&name("f"), &rv(&f))]);

    // The future version was asked for a bounded number of times, never after the relist.
    let rvs = watch_rvs(&s);
    let future = rvs.iter().filter(|v| **v == e_rv).count();
    assert!(future <= 3, "watched from {e_rv} {future} times: {rvs:?}");
    // (The dropped connection already sends it to a relist: usually never asked at all;
    // then every watch after the first, from the initial list, names the relist's version.)
    let after_future = rvs.iter().rposition(|v| *v == e_rv).map_or(1, |i| i + 1);
    assert!(rvs[after_future..].iter().all(|v| v == "2"), "{rvs:?}");
    assert_eq!(requests(&s, "list").len(), 2);
}

#[test]
fn list_failures_back_off_then_sync() {
    let s = TestServer::start();
    seed(&s, "a", 10);
    s.faults().fail_next_verb(Some("list"), 4, 500);
    let r = start(&s, opts());
    r.synced();

    let lists = requests(&s, "list");
    let codes: Vec<u16> = lists.iter().map(|l| l.code).collect();
    assert_eq!(
        codes,
        [500, 500, 500, 500, 200],
        "one request per backoff step"
    );
    assert_spaced(&lists, &expected_waits(4));
    assert_eq!(r.rec.events(), [add(&name("a"), "2")]);
}

#[test]
fn server_down_during_the_watch_backs_off_then_relists() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    seed(&s, "a", 10);
    let list_rv = s.resource_version().to_string();
    let r = start(&s, opts());
    r.synced();
    wait_for("the watch", || !requests(&s, "watch").is_empty());

    // The server goes away (its connections drop) and answers 500 five times when back.
    s.faults().fail_next(5, 500);
    s.restart(RvChange::Keep);
    wait_for("a watch after the server is back", || {
        requests(&s, "watch").len() == 2
    });

    // The server we lost may have come back empty or restored: list, do not resume.
    let lists = requests(&s, "list");
    let codes: Vec<u16> = lists.iter().map(|w| w.code).collect();
    assert_eq!(codes, [200, 500, 500, 500, 500, 500, 200]);
    // The dropped connection is the first failure, each 500 the next: waits grow to the cap.
    assert_spaced(&lists[1..], &expected_waits(6)[1..]);
    let watches = requests(&s, "watch");
    assert!(watches.iter().all(|w| w.code == 200));
    assert!(watches
        .iter()
        .all(|w| param(w, "resourceVersion") == Some(list_rv.clone())));

    // Recovered: events flow again.
    let b = api(&s)
        .create(&APIService::new(name("b"), spec("b.example.com", 10)))
        .unwrap();
    wait_for("b in the store", || r.store.get(&name("b")).is_some());
    assert_eq!(
        r.rec.events(),
        [add(&name("a"), &list_rv), add(&name("b"), &rv(&b))]
    );
}

#[test]
fn bookmarks_advance_the_version_a_closed_watch_resumes_from() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .unwrap();
    s.faults()
        .close_watches_after(Some(Duration::from_millis(500)));
    seed(&s, "a", 10);
    let list_rv = s.resource_version().to_string();
    let r = start(&s, opts());
    r.synced();
    wait_for("the watch", || !requests(&s, "watch").is_empty());

    // A write to another kind: the APIService watch sees no object with this version,
    // only bookmarks carrying it.
    let lease = s.seed(
        "leases",
        Some("default"),
        json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "x"}}),
    );
    let lease_rv = lease["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string)
        .unwrap();
    assert_ne!(lease_rv, list_rv);
    wait_for("a watch from the bookmark's version", || {
        watch_rvs(&s).contains(&lease_rv)
    });

    assert_eq!(requests(&s, "list").len(), 1);
    let rvs = watch_rvs(&s);
    assert!(
        rvs.iter().all(|v| *v == list_rv || *v == lease_rv),
        "{rvs:?}"
    );
    assert_eq!(r.rec.events(), [add(&name("a"), &list_rv)]);
}

/// `Api` as is, keeping every watch's canceller so the test can see it was cancelled.
#[derive(Clone, Default)]
struct Spy {
    /// The canceller of every watch call, recorded when the call starts.
    calls: Arc<Mutex<Vec<Canceller>>>,
    /// The canceller of every list call.
    lists: Arc<Mutex<Vec<Canceller>>>,
    /// Watches whose response headers arrived.
    opened: Arc<Mutex<usize>>,
}

struct SpyLw(Api<APIService>, Spy);

impl ListerWatcher<APIService> for SpyLw {
    fn list(
        &self,
        p: &ListParams,
        cancel: &Canceller,
    ) -> Result<autoregister::api::ObjectList<APIService>, Error> {
        self.1.lists.lock().push(cancel.clone());
        ListerWatcher::list(&self.0, p, cancel)
    }
    fn watch(&self, p: &WatchParams, cancel: &Canceller) -> Result<WatchEvents<APIService>, Error> {
        self.1.calls.lock().push(cancel.clone());
        let events = ListerWatcher::watch(&self.0, p, cancel)?;
        *self.1.opened.lock() += 1;
        Ok(events)
    }
}

/// Stops the reflector and joins it on a helper thread, so a reflector that hangs fails
/// the test instead of hanging it.
fn stop_and_join(r: Running, bound: Duration) {
    let started = Instant::now();
    r.handle.stop();
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        r.handle.join();
        let _ = done_tx.send(());
    });
    let joined = done_rx.recv_timeout(bound);
    let took = started.elapsed();
    assert!(joined.is_ok(), "stop and join took over {took:?}");
}

#[test]
fn stop_while_blocked_in_an_idle_watch_returns_promptly() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    seed(&s, "a", 10);
    let spy = Spy::default();
    let r = start_with(SpyLw(api(&s), spy.clone()), opts());
    r.synced();
    // The watch is open (its headers arrived); the reflector now blocks reading it.
    wait_for("an open watch", || *spy.opened.lock() == 1);
    let w = &requests(&s, "watch")[0];
    let t: u64 = param(w, "timeoutSeconds").unwrap().parse().unwrap();
    assert!(
        t >= 300,
        "the server would not end this watch soon by itself"
    );
    assert!(!spy.calls.lock()[0].is_cancelled());

    stop_and_join(r, Duration::from_secs(3));
    assert_eq!(spy.calls.lock().len(), 1, "no watch after stop");
    assert!(
        spy.calls.lock()[0].is_cancelled(),
        "stop cancelled the watch connection"
    );
    assert_eq!(requests(&s, "watch").len(), 1);
}

#[test]
fn stop_while_a_relist_waits_for_a_hung_server_returns_promptly() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    seed(&s, "a", 10);
    let spy = Spy::default();
    let r = start_with(SpyLw(api(&s), spy.clone()), opts());
    r.synced();
    wait_for("an open watch", || *spy.opened.lock() == 1);
    // The server hangs: connections drop, the relist is accepted but never answered.
    take_offline(&s);
    wait_for("a second list call", || spy.lists.lock().len() == 2);

    stop_and_join(r, Duration::from_secs(3));
    assert_eq!(spy.calls.lock().len(), 1, "no watch after the held list");
    assert!(spy.lists.lock()[1].is_cancelled());
    s.faults().resume();
}

#[test]
fn a_silent_watch_is_given_up_after_its_idle_timeout_and_relisted() {
    // Bookmarks every 100 ms: a healthy watch is never silent for the 600 ms idle timeout.
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .unwrap();
    seed(&s, "a", 10);
    let spy = Spy::default();
    let r = start_with(
        SpyLw(api(&s), spy.clone()),
        ReflectorOptions {
            watch_idle_timeout: Some(Duration::from_millis(600)),
            ..opts()
        },
    );
    r.synced();
    wait_for("an open watch", || *spy.opened.lock() == 1);
    // Healthy and quiet for longer than the idle timeout (nothing to await: the point is
    // that nothing happens): bookmarks keep the watch alive.
    let t = Instant::now();
    wait_for("a few bookmark periods", || {
        t.elapsed() >= Duration::from_millis(700)
    });
    assert_eq!(spy.lists.lock().len(), 1, "a bookmarked watch is not idle");
    // Now the server sends nothing at all (a half-open connection looks the same).
    let paused = Instant::now();
    s.faults().pause();
    wait_for("a relist after the silent watch", || {
        spy.lists.lock().len() == 2
    });
    let noticed = paused.elapsed();
    assert!(
        noticed >= Duration::from_millis(500),
        "gave up after {noticed:?}, before the idle timeout"
    );
    assert!(
        noticed < Duration::from_secs(4),
        "noticed after {noticed:?}, not after the watch's minutes-long timeout"
    );
    assert_eq!(
        spy.calls.lock().len(),
        1,
        "the silent watch is followed by a list, not a resumed watch"
    );
    s.faults().resume();
    let b = seed(&s, "b", 10);
    wait_for("b through the new watch", || {
        r.store.get(&name("b")).is_some_and(|o| rv(&o) == b)
    });
}

#[test]
fn resync_redelivers_cached_objects_as_updates() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    for g in ["a", "b", "c"] {
        seed(&s, g, 10);
    }
    let r = start(
        &s,
        ReflectorOptions {
            resync: Some(Duration::from_millis(100)),
            ..opts()
        },
    );
    r.synced();
    wait_for("two resync rounds", || r.rec.len() >= 3 + 6);

    let events = r.rec.events();
    let cached = r.state();
    assert!(events[..3].iter().all(|e| matches!(e, Ev::Add(..))));
    let mut rounds: BTreeMap<String, usize> = BTreeMap::new();
    for e in &events[3..] {
        let Ev::Update(n, old, new, same) = e else {
            panic!("a resync delivers only updates: {e:?}")
        };
        assert!(
            same,
            "{e:?}: a resync hands the cached object as both old and new"
        );
        assert_eq!(old, new);
        assert_eq!(Some(new), cached.get(n));
        *rounds.entry(n.clone()).or_default() += 1;
    }
    assert_eq!(rounds.len(), 3, "every cached object: {rounds:?}");
    assert!(rounds.values().all(|&k| k >= 2), "{rounds:?}");
    assert_eq!(replay(&events), server_state(&s));
}

/// `name → versionPriority`, to compare contents rather than versions.
fn priorities(objs: impl Iterator<Item = (String, i64)>) -> BTreeMap<String, i64> {
    objs.collect()
}

#[test]
fn after_a_rewind_a_reused_version_does_not_hide_a_changed_object() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    seed(&s, "a", 10); // 1
    let c_rv = seed(&s, "c", 10); // 2
    let r = start(&s, opts());
    r.synced();
    let e = api(&s)
        .create(&APIService::new(name("e"), spec("e.example.com", 10)))
        .unwrap();
    wait_for("e in the store", || r.store.get(&name("e")).is_some());
    let base = r.rec.len();

    // c changes while the reflector is away, then the server goes back to version 2: c's
    // new state now carries the very version the cache holds for its old state, as writes
    // after an etcd restore reuse revisions a client has already seen.
    take_offline(&s);
    seed(&s, "c", 20);
    s.restart(RvChange::Rewind(2));
    s.faults().resume();

    wait_for("a relist", || requests(&s, "list").len() == 2);
    wait_converged(&s, &r);
    let server = priorities(s.list_objects("apiservices", None).iter().map(|o| {
        (
            o["metadata"]["name"].as_str().unwrap().to_string(),
            o["spec"]["versionPriority"].as_i64().unwrap(),
        )
    }));
    let cached = priorities(
        r.store
            .list()
            .iter()
            .map(|o| (o.name().to_string(), i64::from(o.spec.version_priority))),
    );
    assert_eq!(cached, server, "the cache holds what the server holds");
    let events = r.events_since(base);
    assert!(
        events.contains(&update(&name("c"), &c_rv, "2")),
        "c's change is delivered: {events:?}"
    );
    assert!(
        events.contains(&update(&name("e"), &rv(&e), "2")),
        "{events:?}"
    );
}

//! Leader election against the in-process test API server, with short durations
//! (lease 1 s, renew deadline 600 ms, retry 100 ms).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use autoregister::api::{Lease, LeaseSpec};
use autoregister::client::{Api, Client};
use autoregister::runtime::leader::{LeaderCallbacks, LeaderConfig, LeaderElector, LeaderHandle};
use autoregister::testserver::{RvChange, TestServer};

const NS: &str = "kube-system";
const NAME: &str = "autoregister";

fn config() -> LeaderConfig {
    LeaderConfig {
        lease_duration: Duration::from_secs(1),
        renew_deadline: Duration::from_millis(600),
        retry_period: Duration::from_millis(100),
    }
}

fn lease_api(s: &TestServer) -> Api<Lease> {
    Api::namespaced(Client::new(s.client_config()).unwrap(), NS)
}

fn start(s: &TestServer, id: &str, callbacks: LeaderCallbacks) -> LeaderHandle {
    LeaderElector::start(lease_api(s), NAME, id.to_string(), config(), callbacks).unwrap()
}

/// The Lease as stored on the server.
fn stored(s: &TestServer) -> Option<LeaseSpec> {
    let v = s.get_object("leases", Some(NS), NAME)?;
    Some(serde_json::from_value::<Lease>(v).unwrap().spec)
}

/// Polls `cond` until it holds or `timeout` passes.
fn wait_for(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Counts calls of a hook.
#[derive(Clone, Default)]
struct Count(Arc<AtomicUsize>);

impl Count {
    fn hook(&self) -> impl Fn() + Send + 'static {
        let c = self.0.clone();
        move || {
            c.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn counting() -> (LeaderCallbacks, Count, Count) {
    let (started, stopped) = (Count::default(), Count::default());
    let cb = LeaderCallbacks::new()
        .on_started_leading(started.hook())
        .on_stopped_leading(stopped.hook());
    (cb, started, stopped)
}

/// Samples two handles in a loop and counts moments at which both led. `a, b, a` sampled in
/// that order with `a` true both times means `a` led throughout (a candidate's leadership is
/// one interval), so a `true` `b` in between is a real overlap, not a sampling artefact.
struct OverlapCheck {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<(usize, usize)>>,
}

impl OverlapCheck {
    fn start(a: Arc<LeaderHandle>, b: Arc<LeaderHandle>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = thread::spawn(move || {
            let (mut samples, mut overlaps) = (0, 0);
            while !st.load(Ordering::SeqCst) {
                let (a1, b1, a2) = (a.is_leader(), b.is_leader(), a.is_leader());
                let (b2, a3, b3) = (b.is_leader(), a.is_leader(), b.is_leader());
                if (a1 && b1 && a2) || (b2 && a3 && b3) {
                    overlaps += 1;
                }
                samples += 1;
                thread::sleep(Duration::from_millis(1));
            }
            (samples, overlaps)
        });
        OverlapCheck {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling; asserts there were many samples and no overlap.
    fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let (samples, overlaps) = self.thread.take().unwrap().join().unwrap();
        assert!(samples > 100, "only {samples} samples");
        assert_eq!(
            overlaps, 0,
            "two leaders at once in {overlaps} of {samples} samples"
        );
    }
}

/// `a` leading and `b` (with `b_callbacks`) following it, sampled for overlap from the start.
fn leader_and_follower(
    s: &TestServer,
    b_callbacks: LeaderCallbacks,
) -> (Arc<LeaderHandle>, Arc<LeaderHandle>, OverlapCheck) {
    let a = Arc::new(start(s, "a", LeaderCallbacks::new()));
    assert!(a.wait_until_leader(Duration::from_secs(3)));
    let b = Arc::new(start(s, "b", b_callbacks));
    let check = OverlapCheck::start(a.clone(), b.clone());
    wait_for(Duration::from_secs(2), "b to see a lead", || {
        b.leader().as_deref() == Some("a")
    });
    (a, b, check)
}

#[test]
fn single_candidate_acquires_renews_and_releases() {
    let s = TestServer::start();
    let (cb, started, stopped) = counting();
    let a = start(&s, "a", cb);
    assert!(a.wait_until_leader(Duration::from_secs(3)));
    assert_eq!(a.identity(), "a");
    assert_eq!(a.leader().as_deref(), Some("a"));
    let first = stored(&s).unwrap();
    assert_eq!(first.holder(), "a");
    assert_eq!(first.lease_transitions, Some(0));
    assert_eq!(first.lease_duration_seconds, Some(1));
    // MicroTime: six fractional digits.
    let renew = first.renew_time.clone().unwrap();
    assert_eq!(renew.len(), "2006-01-02T15:04:05.000000Z".len(), "{renew}");
    assert_eq!(first.acquire_time, first.renew_time);

    // It keeps renewing: renewTime moves, acquireTime and transitions stay.
    wait_for(Duration::from_secs(2), "a renewal", || {
        stored(&s).unwrap().renew_time != first.renew_time
    });
    let renewed = stored(&s).unwrap();
    assert_eq!(renewed.acquire_time, first.acquire_time);
    assert_eq!(renewed.lease_transitions, Some(0));
    assert!(renewed.renewed_at().unwrap() > first.renewed_at().unwrap());
    assert!(a.is_leader());

    a.release_and_stop();
    assert!(!a.is_leader());
    let released = stored(&s).unwrap();
    assert_eq!(released.holder_identity.as_deref(), Some(""));
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert_eq!(released.lease_transitions, Some(0));
    assert_eq!((started.get(), stopped.get()), (1, 1));
    assert!(a.lost().try_recv().is_err(), "a release is not a loss");
    assert!(!a.wait_until_leader(Duration::from_secs(1)));
}

#[test]
fn two_candidates_never_lead_together_and_release_hands_over_at_once() {
    let s = TestServer::start();
    let new_leaders = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let nl = new_leaders.clone();
    let a = Arc::new(start(&s, "a", LeaderCallbacks::new()));
    let b = Arc::new(start(
        &s,
        "b",
        LeaderCallbacks::new().on_new_leader(move |h| nl.lock().push(h.to_string())),
    ));
    let check = OverlapCheck::start(a.clone(), b.clone());
    wait_for(Duration::from_secs(3), "a leader", || {
        a.is_leader() || b.is_leader()
    });
    let (leader, follower) = if a.is_leader() { (a, b) } else { (b, a) };
    let spec = stored(&s).unwrap();
    assert_eq!(spec.holder(), leader.identity());
    assert_eq!(spec.lease_transitions, Some(0));
    wait_for(
        Duration::from_secs(2),
        "the follower to see the leader",
        || follower.leader().as_deref() == Some(leader.identity()),
    );
    // Several lease durations pass and leadership does not move while renewals go on.
    let until = Instant::now() + Duration::from_millis(1500);
    wait_for(Duration::from_secs(3), "time to pass", || {
        assert!(leader.is_leader() && !follower.is_leader());
        Instant::now() >= until
    });

    leader.release_and_stop();
    let released = Instant::now();
    assert!(follower.wait_until_leader(Duration::from_secs(3)));
    let took = released.elapsed();
    // Without the release record the follower would wait out a lease duration (1 s).
    assert!(took < Duration::from_millis(700), "takeover took {took:?}");
    check.finish();
    let spec = stored(&s).unwrap();
    assert_eq!(spec.holder(), follower.identity());
    assert_eq!(spec.lease_transitions, Some(1));
    if follower.identity() == "b" {
        assert_eq!(*new_leaders.lock(), vec!["a".to_string(), "b".to_string()]);
    }
    follower.release_and_stop();
}

#[test]
fn a_dead_leader_is_replaced_only_a_lease_duration_after_its_last_renewal() {
    let s = TestServer::start();
    let (cb, b_started, _) = counting();
    let (a, b, check) = leader_and_follower(&s, cb);

    // Dies without releasing: the record keeps naming a.
    a.stop();
    assert!(!a.is_leader());
    let last = stored(&s).unwrap();
    assert_eq!(last.holder(), "a");
    let last_renewal = last.renewed_at().unwrap();

    assert!(b.wait_until_leader(Duration::from_secs(4)));
    let took_over = SystemTime::now();
    check.finish();
    // renewTime is stamped before the write; b saw the write later still; it may take over
    // only a full lease duration after that.
    let after = took_over.duration_since(last_renewal).unwrap();
    assert!(after >= Duration::from_secs(1), "took over {after:?} after");
    assert!(after < Duration::from_secs(3), "took over {after:?} after");
    let spec = stored(&s).unwrap();
    assert_eq!(spec.holder(), "b");
    assert_eq!(spec.lease_transitions, Some(1));
    // The hook runs on the elector thread just after leadership is published.
    wait_for(Duration::from_secs(1), "on_started_leading", || {
        b_started.get() == 1
    });
    b.release_and_stop();
    assert_eq!(b_started.get(), 1);
}

/// Chaos seeds 15, 454, 541 and 1349 (two replicas, API server restarted empty): the old
/// leader's renewals got 404 without a re-read, so it led on to its renew deadline while the
/// other replica created a fresh Lease and led too; two controllers fought over every name.
#[test]
fn a_lease_lost_with_the_servers_data_keeps_one_leader_and_never_two() {
    let s = TestServer::start();
    let (cb, b_started, _) = counting();
    let (a, b, check) = leader_and_follower(&s, cb);

    s.restart_empty(RvChange::Keep);
    assert!(stored(&s).is_none(), "the Lease went with the data");
    // The leader writes its record anew and leads on; b waits out the term it saw.
    wait_for(Duration::from_secs(2), "a to write the Lease anew", || {
        stored(&s).is_some_and(|l| l.holder() == "a")
    });
    let until = Instant::now() + Duration::from_millis(2500);
    wait_for(Duration::from_secs(4), "several lease durations", || {
        assert!(a.is_leader(), "a stopped leading");
        Instant::now() >= until
    });
    check.finish();
    assert_eq!(b_started.get(), 0, "b never led");
    assert_eq!(stored(&s).unwrap().holder(), "a");
    a.release_and_stop();
    b.release_and_stop();
}

/// A Lease that vanished while its holder was away: the candidate takes over only once the
/// term it last saw has run out, as if the record were still there.
#[test]
fn a_vanished_lease_of_a_dead_leader_is_taken_after_its_term() {
    let s = TestServer::start();
    let (a, b, check) = leader_and_follower(&s, LeaderCallbacks::new());
    a.stop();
    let last_renewal = stored(&s).unwrap().renewed_at().unwrap();
    s.restart_empty(RvChange::Keep);
    assert!(b.wait_until_leader(Duration::from_secs(4)));
    check.finish();
    let after = SystemTime::now().duration_since(last_renewal).unwrap();
    assert!(after >= Duration::from_secs(1), "took over {after:?} after");
    assert_eq!(stored(&s).unwrap().holder(), "b");
    b.release_and_stop();
}

#[test]
fn failing_renewals_lose_leadership_at_the_renew_deadline() {
    let s = TestServer::start();
    let (cb, _, stopped) = counting();
    let a = start(&s, "a", cb);
    assert!(a.wait_until_leader(Duration::from_secs(3)));
    let lost = a.lost();

    s.faults().fail_next_verb(Some("update"), 100_000, 500);
    let failing = Instant::now();
    lost.recv_timeout(Duration::from_secs(3))
        .expect("leadership lost");
    let took = failing.elapsed();
    // The last good renewal started at most a retry period (plus scheduling) before.
    assert!(took >= Duration::from_millis(400), "lost after {took:?}");
    assert!(took < Duration::from_millis(1200), "lost after {took:?}");
    assert!(!a.is_leader());
    assert_eq!(stopped.get(), 1);
    s.faults().clear();

    // A lost elector does not compete again; another candidate takes over once the lease
    // runs out, and a's release then leaves b's lease alone.
    let b = start(&s, "b", LeaderCallbacks::new());
    assert!(b.wait_until_leader(Duration::from_secs(4)));
    assert!(!a.is_leader());
    a.release_and_stop();
    let spec = stored(&s).unwrap();
    assert_eq!(spec.holder(), "b");
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert!(b.is_leader());
    assert_eq!(stopped.get(), 1, "stopped_leading is called once");
    b.release_and_stop();
}

#[test]
fn a_hung_server_loses_leadership_on_time() {
    let s = TestServer::start();
    let a = start(&s, "a", LeaderCallbacks::new());
    assert!(a.wait_until_leader(Duration::from_secs(3)));
    let lost = a.lost();
    s.faults().pause();
    let paused = Instant::now();
    lost.recv_timeout(Duration::from_secs(3))
        .expect("leadership lost");
    let took = paused.elapsed();
    // The request timeout (1 s here) is squeezed to the renew deadline (600 ms), so a
    // request that never returns does not keep us "leading" past it.
    assert!(took < Duration::from_millis(900), "lost after {took:?}");
    assert!(!a.is_leader());
    s.faults().resume();
    a.release_and_stop();
    // The record still named a and nobody else wrote: the release goes through.
    assert_eq!(stored(&s).unwrap().holder(), "");
}

#[test]
fn release_and_stop_is_prompt_during_a_wait() {
    let s = TestServer::start();
    let slow = LeaderConfig {
        lease_duration: Duration::from_secs(30),
        renew_deadline: Duration::from_secs(20),
        retry_period: Duration::from_secs(10),
    };
    let a = LeaderElector::start(
        lease_api(&s),
        NAME,
        "a".into(),
        slow,
        LeaderCallbacks::new(),
    )
    .unwrap();
    assert!(a.wait_until_leader(Duration::from_secs(3)));
    let before = s.count("update") + s.count("create");
    let t = Instant::now();
    a.release_and_stop();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(s.count("update") + s.count("create"), before + 1);
    assert_eq!(stored(&s).unwrap().holder(), "");
}

#[test]
fn a_candidate_that_never_led_writes_nothing_on_stop() {
    let s = TestServer::start();
    let a = start(&s, "a", LeaderCallbacks::new());
    assert!(a.wait_until_leader(Duration::from_secs(3)));
    let (cb, started, stopped) = counting();
    let b = start(&s, "b", cb);
    wait_for(Duration::from_secs(2), "b to see a lead", || {
        b.leader().as_deref() == Some("a")
    });
    b.release_and_stop();
    assert_eq!(stored(&s).unwrap().holder(), "a");
    assert_eq!((started.get(), stopped.get()), (0, 0));
    assert!(a.is_leader());
    a.release_and_stop();
}

#[test]
fn invalid_configuration_is_refused() {
    let s = TestServer::start();
    let bad = LeaderConfig {
        lease_duration: Duration::from_secs(1),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(100),
    };
    let err = LeaderElector::start(lease_api(&s), NAME, "a".into(), bad, LeaderCallbacks::new())
        .unwrap_err();
    assert!(err.to_string().contains("renew deadline"), "{err}");
    assert!(stored(&s).is_none());
}

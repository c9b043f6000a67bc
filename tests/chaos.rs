//! Seeded chaos runs through the real binary against the test API server: each seed
//! picks a short schedule of faults (500/503/504, 429 with and without Retry-After,
//! latency, stalled and dropped watches, 410s, conflicts, a paused server), other
//! writers editing and deleting objects (ours and unowned ones), manifest rewrites,
//! truncation and emptying, controller restarts (SIGTERM and SIGKILL) and API server
//! restarts that lose every object. Then the
//! faults stop and the checker (`support/chaos/check.rs`) judges the server's request
//! log and final state.
//!
//! `make test` runs seeds 1..=50 and the REGRESSION_SEEDS; `make chaos SEEDS=N` runs more
//! (`CHAOS_SEEDS=N`, from `CHAOS_FIRST`, default 1); `CHAOS_SEED=S` replays one seed.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/chaos/mod.rs"]
mod chaos;
#[path = "support/rng.rs"]
mod rng;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use chaos::check::Switches;

/// Seeds in `make test`.
const DEFAULT_SEEDS: u64 = 50;
/// Seeds that once failed, run in `make test` besides 1..=50 (numbers of the schedule
/// table at commit 4ad1558; each also has a focused regression test). 244 and 454 (and 15): two
/// replicas both led after the API server lost the Lease (tests/leader.rs). Seed 15 again
/// (soak): a replica that had not read the Lease yet when it was lost creates a fresh one, as
/// client-go's does, and leads beside the old leader until that one's next renewal; their
/// creates and deletes of one name were unpaced, 30+ a second (tests/ownership.rs, paced now).
const REGRESSION_SEEDS: &[u64] = &[244, 258, 454, 536, 1217, 3157, 3795, 4188];
/// Steps per schedule: ~1 s of chaos per seed.
const STEPS: usize = 8;
/// Seeds run at once, each with its own server and binary (mostly idle processes, so
/// more than the 2 cores).
const PARALLEL: usize = 10;

/// Switches for invariants a known bug on another branch breaks: `false` reports their
/// violations as KNOWN without failing. The lead sets each back to `true` once that
/// branch is merged (and the seeds listed pass). Seed numbers below are those of the
/// schedule table at commit 4ad1558 (adding a fault kind reshuffles every seed).
const SWITCHES: Switches = Switches {
    // Issue 10 (fixed by its merge): updates were sent up to ~100 ms after SIGTERM
    // ("signal received, stopping" then "6C update: ok"); seeds 9, 27, 31, 32, 38.
    no_write_after_sigterm: true,
    // Issue 11 (fixed by its merge): a 429 with Retry-After: 0 was retried at once
    // (add_after(0)), up to 112 writes to one name within 1 s; seeds 48, 54, 72, 77, 95
    // (41 of seeds 1..=1000).
    no_hot_loop: true,
    // Seed 536 (issue 14, fixed): a watch refused with a 504 was resumed from its old
    // resourceVersion, so an API server that restarted empty during the backoff was only
    // relisted by `--relist` (10 min). Now only a 429 resumes; see REGRESSION_SEEDS.
    converges: true,
};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn seeded_chaos_runs_hold_every_invariant() {
    let seeds: Vec<u64> = match env_u64("CHAOS_SEED") {
        Some(s) => vec![s],
        None => {
            let first = env_u64("CHAOS_FIRST").unwrap_or(1);
            match env_u64("CHAOS_SEEDS") {
                Some(n) => (first..first + n).collect(),
                None => (first..first + DEFAULT_SEEDS)
                    .chain(REGRESSION_SEEDS.iter().copied())
                    .collect(),
            }
        }
    };
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let seeds = Arc::new(seeds);
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..PARALLEL.min(seeds.len()))
        .map(|_| {
            let (next, seeds, outcomes) = (next.clone(), seeds.clone(), outcomes.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                let Some(&seed) = seeds.get(i) else { return };
                let o = chaos::run(seed, STEPS, SWITCHES);
                outcomes.lock().unwrap().push(o);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a chaos thread panicked");
    }
    let mut outcomes = std::mem::take(&mut *outcomes.lock().unwrap());
    outcomes.sort_by_key(|o| o.seed);
    let slowest = outcomes.iter().max_by_key(|o| o.took);
    let lag = outcomes.iter().filter_map(|o| o.sigterm_lag).max();
    eprintln!(
        "chaos: {} seeds in {:.1} s (slowest: seed {} in {:.1} s), {} requests checked; \
         SIGTERM acted on at most {} ms after it was sent",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        slowest.map_or(0, |o| o.seed),
        slowest.map_or(0.0, |o| o.took.as_secs_f64()),
        outcomes.iter().map(|o| o.requests).sum::<usize>(),
        lag.map_or(0, |l| l.as_millis()),
    );
    if let [o] = &outcomes[..] {
        // One seed replayed: show what it did, pass or fail.
        eprintln!("seed {} schedule:", o.seed);
        for s in &o.steps {
            eprintln!("    {s}");
        }
        eprintln!("seed {} timeline:", o.seed);
        for l in &o.timeline {
            eprintln!("    {l}");
        }
    }
    for o in &outcomes {
        for v in o.violations.iter().filter(|v| v.known.is_some()) {
            eprintln!(
                "KNOWN seed {} {}: {} [{}]",
                o.seed,
                v.invariant,
                v.detail,
                v.known.unwrap_or_default()
            );
        }
    }
    let failed: Vec<_> = outcomes
        .iter()
        .filter(|o| o.violations.iter().any(|v| v.known.is_none()))
        .collect();
    for o in &failed {
        eprintln!(
            "\n=== seed {} failed ({:.1} s) ===",
            o.seed,
            o.took.as_secs_f64()
        );
        for v in o.violations.iter().filter(|v| v.known.is_none()) {
            eprintln!("  VIOLATED {}: {}", v.invariant, v.detail);
        }
        eprintln!("  schedule:");
        for s in &o.steps {
            eprintln!("    {s}");
        }
        eprintln!("  timeline:");
        for l in &o.timeline {
            eprintln!("    {l}");
        }
        for (i, l) in o.logs.iter().enumerate() {
            eprintln!("  --- controller process {i} (log tail) ---\n{l}");
        }
        eprintln!(
            "  replay: CHAOS_SEED={} cargo test --features testing --test chaos -- --nocapture",
            o.seed
        );
    }
    assert!(
        failed.is_empty(),
        "{} of {} seeds broke an invariant: {:?} (details above)",
        failed.len(),
        outcomes.len(),
        failed.iter().map(|o| o.seed).collect::<Vec<_>>()
    );
}

/// The checker itself: a crafted log breaking each invariant once is flagged for each,
/// and the same log without the bad requests passes (a checker that never fires proves
/// nothing).
#[test]
fn the_checker_names_every_broken_invariant_and_passes_a_clean_log() {
    use std::time::{Duration, SystemTime};

    use autoregister::api::APIServiceSpec;
    use autoregister::testserver::RequestRecord;
    use chaos::check::{check, Bounds};
    use chaos::world::{proc_user, DesiredVersion, Flavour, ProcSpan, Timeline};
    use serde_json::json;

    let t0 = SystemTime::now();
    let s = |ms: u64| t0 + Duration::from_millis(ms);
    let rec = |ms: u64, verb: &str, name: &str, code: u16, body: Option<serde_json::Value>| {
        RequestRecord {
            verb: verb.into(),
            method: String::new(),
            path: String::new(),
            query: String::new(),
            resource: Some("apiservices".into()),
            subresource: None,
            namespace: None,
            name: Some(name.into()),
            code,
            time: s(ms),
            body,
            user_agent: Some(autoregister::client::USER_AGENT.into()),
            content_type: None,
            field_manager: None,
            uid_precondition: None,
            // Process 0 runs until 7 s, process 1 from 8 s.
            user: Some(proc_user(usize::from(ms >= 8000))),
            groups: Vec::new(),
            impersonated_by: None,
        }
    };
    let desired = |ms: u64, names: &[&str]| DesiredVersion {
        at: s(ms),
        specs: names
            .iter()
            .map(|n| (n.to_string(), APIServiceSpec::default()))
            .collect(),
        ambiguous: false,
    };
    let t = Timeline {
        desired: vec![
            desired(0, &["v1.c0.x", "v1.c1.x"]),
            desired(5000, &["v1.c0.x"]),
        ],
        foreign_uids: ["u-foreign".to_string()].into(),
        never_ours: ["v1.builtin".to_string()].into(),
        procs: vec![
            ProcSpan {
                user: proc_user(0),
                started: s(0),
                terminated: Some(s(7000)),
                code: Some(0),
                exit_after: Some(Duration::from_millis(100)),
                log: String::new(),
            },
            ProcSpan {
                user: proc_user(1),
                started: s(8000),
                terminated: Some(s(20_000)),
                code: Some(0),
                exit_after: Some(Duration::from_millis(100)),
                log: String::new(),
            },
        ],
        faults_stopped: Some(s(9000)),
        converged: Some(s(10_000)),
        quiet: Some((s(10_300), s(11_000))),
        unconverged: Vec::new(),
        steps: Vec::new(),
        retry_after_zero: vec![(s(1900), s(2100))],
        ..Timeline::default()
    };
    let del = |uid: &str| Some(json!({"preconditions": {"uid": uid}}));
    let clean = vec![
        rec(100, "create", "v1.c0.x", 201, None),
        rec(200, "create", "v1.c1.x", 201, None),
        // c1 stops being desired at 5 s: deleting it afterwards is right.
        rec(5500, "delete", "v1.c1.x", 200, del("u-c1")),
        rec(
            9500,
            "update",
            "v1.c0.x",
            200,
            Some(json!({"metadata": {"uid": "u-c0"}})),
        ),
    ];
    let on = Switches {
        no_write_after_sigterm: true,
        no_hot_loop: true,
        converges: true,
    };
    let b = Bounds::default();
    assert!(check(&clean, &t, &b, on).is_empty());

    let mut bad = clean.clone();
    bad.push(rec(
        300,
        "update",
        "v1.c0.x",
        200,
        Some(json!({"metadata": {"uid": "u-foreign"}})),
    ));
    bad.push(rec(400, "delete", "v1.c0.x", 200, None));
    bad.push(rec(10_500, "update", "v1.c0.x", 200, None));
    bad.push(rec(7500, "create", "v1.c0.x", 201, None));
    // A built-in of kube-apiserver's, updated under its own name.
    bad.push(rec(600, "update", "v1.builtin", 200, None));
    for i in 0..40 {
        bad.push(rec(2000 + i, "update", "v1.c1.x", 429, None));
    }
    bad.sort_by_key(|r| r.time);
    let mut t_bad = t;
    t_bad.procs[1].code = None;
    t_bad.unexpected_exits.push((0, 2));
    let names: std::collections::BTreeSet<&str> = check(&bad, &t_bad, &b, on)
        .iter()
        .map(|v| v.invariant)
        .collect();
    let want: std::collections::BTreeSet<&str> = [
        "no write to an object that is not ours",
        "every delete carries a UID precondition",
        "nothing still desired is deleted",
        "no churn once converged",
        "no hot loop (writes per key)",
        "no write after SIGTERM",
        "clean exit on SIGTERM",
        "the controller keeps running",
    ]
    .into();
    assert_eq!(names, want);

    // With a switch off, its violations are reported as known; a hot loop counts as
    // issue 11's only when 429s with Retry-After: 0 were being answered then.
    let off = Switches {
        no_write_after_sigterm: false,
        no_hot_loop: false,
        converges: true,
    };
    let known = |t: &Timeline| -> Vec<(&'static str, bool)> {
        let mut k: Vec<_> = check(&bad, t, &b, off)
            .iter()
            .filter(|v| v.invariant.starts_with("no hot loop") || v.invariant.contains("SIGTERM"))
            .map(|v| (v.invariant, v.known.is_some()))
            .collect();
        k.sort();
        k
    };
    assert_eq!(
        known(&t_bad),
        [
            ("clean exit on SIGTERM", false),
            ("no hot loop (writes per key)", true),
            ("no write after SIGTERM", true)
        ]
    );
    t_bad.retry_after_zero.clear();
    assert_eq!(known(&t_bad)[1], ("no hot loop (writes per key)", false));

    // Leader election: writes only by the process whose Lease write took the lease; a
    // release names no holder; after the server lost its data (the Lease with it), the old
    // leader's renew deadline is not judged.
    let lease = |ms: u64, verb: &str, holder: &str, user: usize| {
        let mut r = rec(ms, verb, "autoregister", 200, None);
        r.resource = Some("leases".into());
        r.body = Some(json!({"spec": {"holderIdentity": holder}}));
        r.user = Some(proc_user(user));
        r
    };
    let by = |mut r: RequestRecord, user: usize| {
        r.user = Some(proc_user(user));
        r
    };
    let mut tl = Timeline {
        flavour: Flavour {
            kube_apiserver: false,
            leader_elect: true,
        },
        desired: vec![desired(0, &["v1.c0.x"])],
        converged: Some(s(10_000)),
        ..Timeline::default()
    };
    let elected = vec![
        lease(50, "create", "a", 0),
        by(rec(100, "create", "v1.c0.x", 201, None), 0),
        lease(3000, "update", "", 0),
        lease(3200, "update", "b", 1),
        by(rec(3300, "update", "v1.c0.x", 200, None), 1),
    ];
    assert!(check(&elected, &tl, &b, on).is_empty());
    let mut split = elected.clone();
    split.push(by(rec(3100, "update", "v1.c0.x", 200, None), 0));
    split.push(by(rec(3400, "update", "v1.c0.x", 200, None), 0));
    split.sort_by_key(|r| r.time);
    let leader_violations = |log: &[RequestRecord], t: &Timeline| {
        check(log, t, &b, on)
            .iter()
            .filter(|v| v.invariant == "only the lease holder writes")
            .count()
    };
    assert_eq!(leader_violations(&split, &tl), 2);
    tl.data_lost = vec![s(3350)];
    assert_eq!(
        leader_violations(&split, &tl),
        1,
        "the write at 3.4 s is exempt"
    );
}

/// Seed 26 once failed "no write after SIGTERM" with a write the server logged 97 ms after
/// the test sent the signal: on a loaded machine the process's signal thread ran later
/// than that, and until it does the process rightly keeps working. The checker judges
/// from when the process stopped (its own log line), and still flags a write after that.
#[test]
fn a_write_before_the_process_saw_sigterm_is_not_after_it() {
    use std::time::{Duration, SystemTime};

    use autoregister::api::time::format_rfc3339_micro;
    use autoregister::testserver::RequestRecord;
    use chaos::check::{check, Bounds, SIGTERM_HANDLED};
    use chaos::world::{proc_user, ProcSpan, Timeline};

    let t0 = SystemTime::now();
    let s = |ms: u64| t0 + Duration::from_millis(ms);
    let update = |ms: u64| RequestRecord {
        verb: "update".into(),
        method: "PUT".into(),
        path: String::new(),
        query: String::new(),
        resource: Some("apiservices".into()),
        subresource: None,
        namespace: None,
        name: Some("v1.c0.example.com".into()),
        code: 504,
        time: s(ms),
        body: None,
        user_agent: Some(autoregister::client::USER_AGENT.into()),
        content_type: None,
        field_manager: None,
        uid_precondition: None,
        user: Some(proc_user(0)),
        groups: Vec::new(),
        impersonated_by: None,
    };
    // As seed 26: SIGTERM sent at 752 ms; the process stopped at 840 ms by its log.
    let proc = |log: String| ProcSpan {
        user: proc_user(0),
        started: s(0),
        terminated: Some(s(752)),
        code: Some(0),
        exit_after: Some(Duration::from_millis(200)),
        log,
    };
    let stopped_log = format!(
        "{} INFO  {SIGTERM_HANDLED}, stopping (a second one exits at once)\n",
        format_rfc3339_micro(s(840))
    );
    let judge = |log: String, write_ms: u64| -> Vec<String> {
        let t = Timeline {
            procs: vec![proc(log)],
            ..Timeline::default()
        };
        check(&[update(write_ms)], &t, &Bounds::default(), SWITCHES)
            .into_iter()
            .filter(|v| v.invariant == "no write after SIGTERM")
            .map(|v| v.detail)
            .collect()
    };
    // Received 849 ms: sent before the process stopped at 840 ms (within the grace).
    assert_eq!(judge(stopped_log.clone(), 849), Vec::<String>::new());
    // Received well after it stopped: a write after the signal.
    let late = judge(stopped_log, 1000);
    assert_eq!(late.len(), 1, "{late:?}");
    assert!(late[0].contains("stopped by +0.841s"), "{late:?}");
    // Without the log line the signal's own time is all there is (the old judgement).
    assert_eq!(judge(String::new(), 849).len(), 1);
}

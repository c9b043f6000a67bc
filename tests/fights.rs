//! A fight through the binary, on the test server playing kube-apiserver and on the real
//! kube-apiserver: another writer undoes a declared field (or deletes the object) again as
//! soon as we put it back. Each put-back waits its pace (5 ms doubling), never longer than
//! `--fight-backoff-max`; the manifest's value is back within that cap of the writer's
//! last edit; then nothing more is written, and once the fight has cooled down a one-off
//! edit is put back at once again. The report, the gauge and `plan` say so.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/field_ownership.rs"]
mod field_ownership;
#[path = "support/kube.rs"]
mod kube;
#[path = "support/tls_backend.rs"]
mod tls_backend;

use std::time::{Duration, Instant, SystemTime};

use autoregister::api::APIService;
use autoregister::client::{Api, DeleteParams};
use binary::{http_get, wait_until, wait_until_within, Proc, Scratch, WAIT};
use cluster::Cluster;
use field_ownership::{api_as, events, get, logged_at, manifest, Names};

/// The cap the tests run with: short, so 20 put-backs take half a minute, yet long enough
/// that an uncapped doubling (5 ms · 2^19 ≈ 44 min by the 20th) would pass it by far.
const CAP: Duration = Duration::from_secs(2);
/// Put-backs the writer forces: past the cap's step (the 10th) by ten.
const PUT_BACKS: usize = 20;
/// A put-back answers its edit within the cap and this much (the bound).
const SLACK: Duration = Duration::from_secs(5);
/// The writer the fight is with, as `managedFields` names it.
const WRITER: &str = "kubectl-patch";

/// How the other writer undoes our work.
#[derive(Clone, Copy)]
enum Undo {
    /// Sets `spec.versionPriority` to 20 (the manifest says 10).
    Field,
    /// Deletes the object.
    Delete,
}

impl Undo {
    /// Whether the object shows our work (what the writer undoes next).
    fn ours(self, o: Option<&APIService>) -> bool {
        match self {
            Undo::Field => o.is_some_and(|o| o.spec.version_priority == 10),
            Undo::Delete => o.is_some(),
        }
    }

    /// Undoes it; `false` when the write met a conflict or the object went meanwhile.
    fn undo(self, api: &Api<APIService>, name: &str) -> bool {
        match self {
            Undo::Field => api.get(name).is_ok_and(|mut o| {
                o.spec.version_priority = 20;
                api.update(&o).is_ok()
            }),
            Undo::Delete => api.delete(name, &DeleteParams::default()).is_ok(),
        }
    }

    /// The verb of our put-back in the log.
    fn verb(self) -> &'static str {
        match self {
            Undo::Field => "update",
            Undo::Delete => "create",
        }
    }
}

/// Our successful writes of `verb` to `name`, by the log's timestamps.
fn put_backs(log: &str, name: &str, verb: &str) -> Vec<SystemTime> {
    log.lines()
        .filter(|l| {
            l.contains(&format!("{name} "))
                && l.contains(&format!(" {verb} ("))
                && l.ends_with(": ok")
        })
        .map(logged_at)
        .collect()
}

/// The `autoregister_apiservices_in_fight` gauge of the process at `addr`.
fn in_fight(addr: &str) -> Option<u64> {
    let (_, body) = http_get(addr, "/metrics");
    body.lines()
        .find_map(|l| l.strip_prefix("autoregister_apiservices_in_fight "))
        .and_then(|v| v.trim().parse().ok())
}

/// The fight as the issue describes it, undone as `undo` says.
fn fight(c: &Cluster, undo: Undo, test: &str) {
    let n = Names::new(test);
    let s = Scratch::new(test);
    s.write("a.yaml", &manifest(&n, "", ""));
    let p = Proc::run(
        c.target(),
        &s,
        &n.args(&["--fight-backoff-max", "2s", "--health-addr", "127.0.0.1:0"]),
    );
    let ops = p.ops_addr();
    assert!(
        wait_until(|| undo.ours(get(c, &n.name).as_ref())),
        "{}",
        p.log()
    );
    let writer = api_as(c, WRITER);
    // Each edit, then the time until the writer sees the manifest's value (or the object)
    // back, polled every 10 ms.
    let mut answered = Vec::new();
    let fight_started = Instant::now();
    for i in 0..PUT_BACKS {
        let edited = Instant::now();
        assert!(
            wait_until(|| undo.undo(&writer, &n.name)),
            "edit {i}\n{}",
            p.log()
        );
        assert!(
            wait_until_within(CAP + SLACK, || undo.ours(get(c, &n.name).as_ref())),
            "edit {i} not put back within {:?}\n{}",
            CAP + SLACK,
            p.log()
        );
        answered.push(edited.elapsed());
    }
    let fought = fight_started.elapsed();
    eprintln!(
        "put back after (ms): {:?}",
        answered.iter().map(Duration::as_millis).collect::<Vec<_>>()
    );
    // Before the fight's threshold (the 5th contested write) each edit is put back at once.
    for (i, a) in answered.iter().take(4).enumerate() {
        assert!(*a < Duration::from_secs(1), "edit {i} put back after {a:?}");
    }
    // The pace reached the cap and stayed there (an uncapped doubling would be far past it,
    // and fail the bound above); the writer's own edit eats a little of each wait.
    assert!(
        answered[PUT_BACKS - 5..].iter().all(|a| *a >= CAP / 2),
        "the last put-backs were not paced: {answered:?}"
    );
    // Our writes: one per edit (none spare), never more than one a second on average, each
    // at least its pace after the one before (5 ms doubling, capped).
    // The delete case's first create registered the name: no put-back.
    let first = usize::from(matches!(undo, Undo::Delete));
    // The writer can see our last put-back before the program has logged its answer: wait
    // for that line (an extra write would show here or in the quiet 10 s below).
    wait_until(|| put_backs(&p.log(), &n.name, undo.verb()).len() >= first + PUT_BACKS);
    let log = p.log();
    let puts = put_backs(&log, &n.name, undo.verb());
    let puts = &puts[first.min(puts.len())..];
    assert_eq!(puts.len(), PUT_BACKS, "{log}");
    assert!(
        (puts.len() as f64) <= fought.as_secs_f64(),
        "{} writes in {fought:?}\n{log}",
        puts.len()
    );
    for (k, pair) in puts.windows(2).enumerate() {
        let gap = pair[1].duration_since(pair[0]).unwrap_or_default();
        let pace = (Duration::from_millis(5) * (1u32 << k.min(20))).min(CAP);
        assert!(
            gap + Duration::from_millis(1) >= pace,
            "put-back {} came {gap:?} after the one before, within its pace {pace:?}\n{log}",
            k + 2
        );
    }
    // Reported once, naming the other writer (a field fight also by Event) and the pace.
    let report = match undo {
        Undo::Field => format!(
            "{}: FieldFight: spec.versionPriority is also written by {WRITER}",
            n.name
        ),
        Undo::Delete => format!(
            "{}: 5 writes within 300s undoing another writer's changes",
            n.name
        ),
    };
    let reported = log
        .lines()
        .filter(|l| l.contains(&report))
        .collect::<Vec<_>>();
    assert_eq!(reported.len(), 1, "{log}");
    assert!(
        reported[0].contains("doubling to every 2s while the fight goes on"),
        "{log}"
    );
    assert_eq!(in_fight(&ops), Some(1), "the gauge during the fight");
    if let Undo::Field = undo {
        let ev = events(c, &n.name, "FieldFight");
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert!(
            ev[0].note.contains(WRITER) && ev[0].note.contains("every 2s"),
            "{:?}",
            ev[0].note
        );
        // `plan` shows the name in a fight and with whom, from that Event.
        let (code, out) = Proc::command("plan", c.target(), &s, &n.args(&["--dry-run=none"]))
            .wait_exit_stdout_first(WAIT);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.lines().any(
                |l| l.starts_with("    fight reported by a running instance at ")
                    && l.contains(&format!("spec.versionPriority is also written by {WRITER}"))
            ),
            "{out}"
        );
    }
    // The writer has stopped: nothing of ours follows for 10 s, and the fight cools down.
    let writes = put_backs(&p.log(), &n.name, undo.verb()).len();
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(
        put_backs(&p.log(), &n.name, undo.verb()).len(),
        writes,
        "{}",
        p.log()
    );
    assert_eq!(in_fight(&ops), Some(0), "the gauge once the fight is over");
    // Twice the cap without a contested write: the next one-off edit is put back at once.
    let edited = Instant::now();
    assert!(wait_until(|| undo.undo(&writer, &n.name)));
    assert!(
        wait_until_within(Duration::from_secs(1), || undo
            .ours(get(c, &n.name).as_ref())),
        "a one-off edit after the fight was not put back within 1 s\n{}",
        p.log()
    );
    eprintln!("one-off edit put back after {:?}", edited.elapsed());
    let (code, log) = p.terminate();
    assert_eq!(code, 0, "{log}");
    field_ownership::delete(c, &[&n.name]);
}

fn a_writer_undoing_a_declared_field_is_answered_within_the_cap(c: &Cluster) {
    fight(c, Undo::Field, "capped-field");
}

fn a_writer_deleting_the_object_is_answered_within_the_cap(c: &Cluster) {
    fight(c, Undo::Delete, "capped-delete");
}

on_both!(
    a_writer_undoing_a_declared_field_is_answered_within_the_cap,
    a_writer_deleting_the_object_is_answered_within_the_cap,
);

/// A cap outside 5ms..=1000s is a usage error naming the flag and the range.
#[test]
fn a_cap_out_of_range_is_a_usage_error() {
    for bad in ["1ms", "1001s", "1h"] {
        let (code, out) =
            Proc::spawn(&["run", "--manifests", ".", "--fight-backoff-max", bad]).wait_exit(WAIT);
        assert_eq!(code, 2, "{bad}: {out}");
        assert!(
            out.contains("--fight-backoff-max must be 5ms..=1000s"),
            "{bad}: {out}"
        );
    }
}

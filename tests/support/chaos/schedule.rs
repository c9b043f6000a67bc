//! What a seed does: a short list of steps (faults, other writers, manifest edits,
//! restarts), each drawn from a weighted table. A new fault kind is one enum variant,
//! one row in `KINDS` and one arm in `World::apply`.

use crate::rng::Rng;

/// Names the manifests may declare (`v1.c{i}.example.com`).
pub const POOL: usize = 5;
/// Names only other writers use (`v1.u{i}.example.com`): never desired, never ours.
pub const FOREIGN: usize = 2;
/// Manifest files the pool is spread over.
pub const FILES: &[&str] = &["a.yaml", "b.yaml"];

/// One step of a chaos schedule.
#[derive(Clone, Debug)]
pub enum Step {
    /// The next `count` requests (of `verb`, or any) fail with `code` (500, 503, 504).
    Fail {
        code: u16,
        count: usize,
        verb: Option<&'static str>,
    },
    /// For this step, this share (per mille) of requests gets 429 with
    /// `Retry-After: secs`, or none (a sustained overload, not a blip).
    Throttle {
        per_mille: u32,
        retry_after: Option<u32>,
        /// Another writer edits one of our objects as it starts, so there is work to
        /// retry while throttled.
        with_work: bool,
    },
    /// Every answer is delayed by `ms` for this step.
    Latency { ms: u64 },
    /// Watches stay open but deliver nothing for this step.
    StallWatches,
    /// The server drops every connection (watches too), keeping its data.
    DropConnections,
    /// The next watch that names a resourceVersion gets 410 Expired; connections drop.
    ExpireWatch,
    /// The next `count` updates meet a concurrent write (a real 409 Conflict, then an event).
    ConflictUpdates { count: usize },
    /// Everything (watches included) is held, unanswered, for this step.
    Pause,
    /// Another writer sets `versionPriority` on pool name `i` if the object is ours.
    EditOurs { i: usize, priority: u32 },
    /// Another writer deletes pool name `i` if the object is ours.
    DeleteOurs { i: usize },
    /// Another writer creates an unlabelled object at pool name `i` (`pool`) or foreign
    /// name `i`, if absent.
    CreateForeign { pool: bool, i: usize },
    /// Another writer edits or deletes one of the unowned objects.
    TouchForeign { i: usize, delete: bool },
    /// The manifests are rewritten: each pool name is declared (in a random file) or not.
    Rewrite {
        declared: Vec<bool>,
        priorities: Vec<u32>,
    },
    /// One manifest file is cut at a fraction of its length (may still parse).
    Truncate { file: usize, keep_per_mille: u32 },
    /// One manifest file is emptied.
    Empty { file: usize },
    /// The controller is stopped (SIGTERM when `graceful`, else SIGKILL) and started again.
    /// When `busy`, the signal lands while writes are queued and in flight (answers slowed
    /// down, our objects just edited by someone else).
    Restart { graceful: bool, busy: bool },
    /// Nothing happens; the controller works.
    Idle,
    /// The API server restarts with no objects (etcd lost), its resourceVersion kept or
    /// jumped forward: everything desired must come back.
    ServerRestartEmpty { jump: bool },
}

/// Draws one step of a kind.
type MakeStep = fn(&mut Rng) -> Step;

/// Weights of each kind. The table is part of every seed's meaning: a seed replays the
/// same schedule only on the same table (adding a kind reshuffles every seed).
const KINDS: &[(u32, MakeStep)] = &[
    (3, |r| Step::Fail {
        code: *r.pick(&[500, 503, 504]),
        count: 1 + r.below(6),
        verb: *r.pick(&[
            None,
            Some("create"),
            Some("patch"),
            Some("delete"),
            Some("list"),
            Some("watch"),
        ]),
    }),
    (3, |r| Step::Throttle {
        per_mille: *r.pick(&[300, 700, 1000]),
        retry_after: *r.pick(&[None, Some(0), Some(0), Some(1)]),
        with_work: r.chance(0.7),
    }),
    (1, |r| Step::Latency {
        ms: r.range(5, 120),
    }),
    (1, |_| Step::StallWatches),
    (1, |_| Step::DropConnections),
    (2, |_| Step::ExpireWatch),
    (2, |r| Step::ConflictUpdates {
        count: 1 + r.below(4),
    }),
    (1, |_| Step::Pause),
    (3, |r| Step::EditOurs {
        i: r.below(POOL),
        priority: r.range(1, 999) as u32,
    }),
    (2, |r| Step::DeleteOurs { i: r.below(POOL) }),
    (2, |r| {
        let pool = r.chance(0.3);
        Step::CreateForeign {
            pool,
            i: r.below(if pool { POOL } else { FOREIGN }),
        }
    }),
    (1, |r| Step::TouchForeign {
        i: r.below(POOL + FOREIGN),
        delete: r.chance(0.5),
    }),
    (3, |r| Step::Rewrite {
        declared: (0..POOL).map(|_| r.chance(0.7)).collect(),
        priorities: (0..POOL).map(|_| r.range(1, 999) as u32).collect(),
    }),
    (1, |r| Step::Truncate {
        file: r.below(FILES.len()),
        keep_per_mille: r.range(0, 999) as u32,
    }),
    (1, |r| Step::Empty {
        file: r.below(FILES.len()),
    }),
    (1, |r| Step::Restart {
        graceful: r.chance(0.6),
        busy: r.chance(0.5),
    }),
    (2, |_| Step::Idle),
    (1, |r| Step::ServerRestartEmpty {
        jump: r.chance(0.5),
    }),
];

/// A seed's schedule: `len` steps, each held for 40–200 ms.
pub fn schedule(rng: &mut Rng, len: usize) -> Vec<(Step, u64)> {
    let total: u32 = KINDS.iter().map(|(w, _)| w).sum();
    (0..len)
        .map(|_| {
            let mut x = rng.below(total as usize) as u32;
            let mut make = KINDS[0].1;
            for (w, f) in KINDS {
                if x < *w {
                    make = *f;
                    break;
                }
                x -= w;
            }
            let step = make(rng);
            (step, rng.range(40, 200))
        })
        .collect()
}

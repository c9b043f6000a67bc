//! Seeded chaos runs through the real binary against the test API server: each seed
//! picks a short schedule of faults (500/503/504, 429 with and without Retry-After,
//! latency, stalled and dropped watches, 410s, conflicts, a paused server), other
//! writers editing and deleting objects (ours and unowned ones), manifest rewrites,
//! truncation and emptying, and controller restarts (SIGTERM and SIGKILL). Then the
//! faults stop and the checker (`support/chaos/check.rs`) judges the server's request
//! log and final state.
//!
//! `make test` runs seeds 1..=50; `make chaos SEEDS=N` runs more
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
/// Steps per schedule: ~1 s of chaos per seed.
const STEPS: usize = 8;
/// Seeds run at once, each with its own server and binary (mostly idle processes, so
/// more than the 2 cores).
const PARALLEL: usize = 6;

/// Switches for invariants a known bug on another branch breaks; each is turned back on
/// by the lead after that branch merges. `true` = asserted.
const SWITCHES: Switches = Switches {
    // Issue 10 (writes after SIGTERM).
    no_write_after_sigterm: true,
    // Issue 11 (Retry-After: 0 hot loop).
    no_hot_loop: true,
    // Issue 11 (410 relists, a server restarted empty).
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
            let n = env_u64("CHAOS_SEEDS").unwrap_or(DEFAULT_SEEDS);
            (first..first + n).collect()
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
    eprintln!(
        "chaos: {} seeds in {:.1} s (slowest: seed {} in {:.1} s), {} requests checked",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        slowest.map_or(0, |o| o.seed),
        slowest.map_or(0.0, |o| o.took.as_secs_f64()),
        outcomes.iter().map(|o| o.requests).sum::<usize>(),
    );
    let failed: Vec<_> = outcomes
        .iter()
        .filter(|o| !o.violations.is_empty())
        .collect();
    for o in &failed {
        eprintln!(
            "\n=== seed {} failed ({:.1} s) ===",
            o.seed,
            o.took.as_secs_f64()
        );
        for v in &o.violations {
            eprintln!("  VIOLATED {}: {}", v.invariant, v.detail);
        }
        eprintln!("  schedule:");
        for s in &o.steps {
            eprintln!("    {s}");
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

//! Seeded chaos runs: a seed picks a schedule of faults, other writers, manifest edits
//! and restarts (`schedule`), the world runs it against the real binary and the test
//! API server (`world`), and the checker judges the request log (`check`).

pub mod check;
pub mod schedule;
pub mod world;

use std::time::{Duration, Instant};

use crate::rng::Rng;
use check::{check, Bounds, Switches, Violation};
use world::World;

/// Bytes of each controller log kept for the report (more when one seed is replayed).
const CHAOS_LOG_TAIL: usize = 4096;

/// One seed's outcome.
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Broken invariants (empty: passed).
    pub violations: Vec<Violation>,
    /// Wall time of the run.
    pub took: Duration,
    /// The schedule, for the report.
    pub steps: Vec<String>,
    /// The desired versions and the convergence times, relative to the first start.
    pub timeline: Vec<String>,
    /// The controller logs (last 4 KB of each), for the report.
    pub logs: Vec<String>,
    /// Requests the server logged.
    pub requests: usize,
    /// The longest time from sending a SIGTERM to the process having stopped on it (its
    /// log line): how late a loaded machine lets the signal thread run.
    pub sigterm_lag: Option<Duration>,
}

/// Runs seed `seed` with `steps` schedule steps.
pub fn run(seed: u64, steps: usize, on: Switches) -> Outcome {
    let started = Instant::now();
    let bounds = Bounds::default();
    let mut rng = Rng::new(seed);
    let mut world = World::new(seed, &mut rng);
    let plan = schedule::schedule(&mut rng, steps);
    world.start_controllers();
    for (step, hold) in &plan {
        world.apply(step, *hold);
        world.restart_exited();
    }
    world.stop_faults();
    world.await_convergence(
        bounds.converge,
        Duration::from_millis(300),
        Duration::from_millis(700),
        bounds.lease_lost_grace,
    );
    world.stop_controllers(true);
    let log = world.server.requests();
    let violations = check(&log, &world.t, &bounds, on);
    let logs = world
        .t
        .procs
        .iter()
        .map(|p| {
            let l = &p.log;
            let tail = if std::env::var_os("CHAOS_SEED").is_some() {
                1 << 20
            } else {
                CHAOS_LOG_TAIL
            };
            let cut = l.len().saturating_sub(tail);
            let cut = (cut..l.len())
                .find(|&i| l.is_char_boundary(i))
                .unwrap_or(l.len());
            l[cut..].to_string()
        })
        .collect();
    world.server.shutdown();
    let timeline = timeline(&world.t);
    let sigterm_lag = world
        .t
        .procs
        .iter()
        .filter_map(|p| {
            check::sigterm_handled(p)?
                .duration_since(p.terminated?)
                .ok()
        })
        .max();
    Outcome {
        seed,
        violations,
        took: started.elapsed(),
        steps: world.t.steps.clone(),
        timeline,
        logs,
        requests: log.len(),
        sigterm_lag,
    }
}

/// When each manifest version was written (with its names and priorities), when faults
/// stopped and when the final state was seen converged, relative to the first start.
fn timeline(t: &world::Timeline) -> Vec<String> {
    let origin = t.procs.first().map(|p| p.started);
    let at = |when: Option<std::time::SystemTime>| match (when, origin) {
        (Some(w), Some(o)) => match w.duration_since(o) {
            Ok(d) => format!("+{:.3}s", d.as_secs_f64()),
            Err(e) => format!("-{:.3}s", e.duration().as_secs_f64()),
        },
        _ => "never".to_string(),
    };
    let f = t.flavour;
    let mut lines = vec![format!(
        "flavour: {}{}",
        if f.kube_apiserver {
            "kube-apiserver"
        } else {
            "plain server"
        },
        if f.leader_elect {
            ", two replicas with --leader-elect"
        } else {
            ""
        }
    )];
    lines.extend(t.desired.iter().map(|d| {
        let specs: Vec<String> = d
            .specs
            .iter()
            .map(|(n, s)| format!("{n}={}", s.version_priority))
            .collect();
        let broken = if d.ambiguous { " (a file broken)" } else { "" };
        format!("{} desired{broken}: {}", at(Some(d.at)), specs.join(" "))
    }));
    for (i, p) in t.procs.iter().enumerate() {
        if p.terminated.is_some() {
            lines.push(format!(
                "{} SIGTERM to process {i} (stopped by {})",
                at(p.terminated),
                at(check::sigterm_handled(p))
            ));
        }
    }
    lines.push(format!("{} faults stopped", at(t.faults_stopped)));
    lines.push(format!("{} converged", at(t.converged)));
    if let Some((from, to)) = t.quiet {
        lines.push(format!(
            "{} to {} quiet window",
            at(Some(from)),
            at(Some(to))
        ));
    }
    lines
}

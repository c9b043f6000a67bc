//! `autoregister run`: keep the manifests' APIServices registered until stopped (or converged, with `--once`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use autoregister::api::Lease;
use autoregister::client::{Api, Canceller};
use autoregister::controller::decision::{Desired, SyncMode};
use autoregister::controller::manifests::{Poll, Reloaded, Reloader};
use autoregister::controller::{
    Controller, ControllerOptions, EventReason, Pending, ReloadResult, NOT_SYNCED_YET,
};
use autoregister::ops::{OpsServer, OpsSources};
use autoregister::runtime::clock::deadline_after;
use autoregister::runtime::leader::{
    default_identity, LeaderCallbacks, LeaderElector, LeaderHandle, LeaderMetrics,
};
use autoregister::runtime::liveness::Heartbeat;
use autoregister::text;
use crossbeam_channel::{never, select, tick, Receiver};
use log::{error, info, warn};

use super::args::RunArgs;
use super::signals::Stop;
use super::{connect, exit, server_version, Failure};

/// How often PATH is checked for changes.
const MANIFEST_POLL: Duration = Duration::from_secs(1);

/// `--once`: how long a finished run waits for its Events to be written (best-effort).
const EVENT_FLUSH: Duration = Duration::from_secs(2);

/// Longest a manifest reload may take before the watcher counts as stuck on `/healthz`.
const MANIFEST_RELOAD_BOUND: Duration = Duration::from_secs(60);

/// Marks a heartbeat idle when a step ends, whichever way it ends.
struct IdleOnDrop<'a>(&'a Heartbeat);

impl Drop for IdleOnDrop<'_> {
    fn drop(&mut self) {
        self.0.idle();
    }
}

/// How often the wait for leadership looks for a stop signal.
const LEADER_WAIT_SLICE: Duration = Duration::from_millis(200);

/// How often `--once` logs its progress while converging.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// How many pending names the `--once` timeout summary lists (then "and N more").
const SUMMARY_NAMES: usize = 10;

/// How a run ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// `--once` converged.
    Converged,
    /// `--once` ran out of time.
    TimedOut,
    /// SIGTERM/SIGINT.
    Signal,
    /// Leadership lost against our will.
    Lost,
    /// `--once`: only names a guard holds are left; waiting will not converge them.
    Blocked,
}

/// Runs `run`; returns the exit code. `stop` has been handling SIGTERM/SIGINT since before
/// this began: a signal at any point of the start-up ends it as one during the run would.
pub fn run(args: &RunArgs, stop: &Stop) -> Result<i32, Failure> {
    // `--timeout` bounds the whole `--once` run: the wait for the lease included.
    let deadline = deadline_after(Instant::now(), args.timeout);
    let o = &args.ownership;
    let mut manifests = Reloader::new(&args.manifests, &o.label_key, o.allow_empty);
    // Read now so a bad manifest exits 2 at once, before any connection.
    let loaded = manifests.load();
    // A signal during the read stops after it: what was read is never applied.
    if stop.signalled() {
        return Ok(stopped_starting(args, stop, loaded.desired.len()));
    }
    if !loaded.errors.is_empty() {
        return Err(Failure::usage(loaded.errors));
    }
    let client = connect::client(&args.kube)?;
    // The version check's question ends with a signal, as every request of the run does.
    let asking = Canceller::new();
    {
        let asking = asking.clone();
        stop.on_signal(move || asking.cancel());
    }
    if stop.signalled() {
        return Ok(stopped_starting(args, stop, loaded.desired.len()));
    }
    // One identity for the Lease and the Events' reportingInstance.
    let identity = default_identity();
    let mut options = ControllerOptions::new(o.label_key.clone());
    options.workers = args.workers;
    options.resync = args.resync;
    options.relist = args.relist;
    options.adopt = o.adopt;
    options.allow_empty = o.allow_empty;
    options.events_instance = args.events.then(|| identity.clone());
    options.withdraw_unavailable = args.withdraw_unavailable;
    options.ca_expiry_warning = args.ca_expiry_warning;
    options.fight_backoff_max = args.fight_backoff_max;
    let controller = Controller::new(client.clone(), options);
    let leader_metrics = args
        .leader_elect
        .then(|| LeaderMetrics::new(args.lease_name.clone()));
    // The handler's own flag closes the write gate: no write after the signal, even before
    // the signal thread has run.
    let signalled = stop.flag();
    {
        let signalled = signalled.clone();
        controller.set_write_gate(move || match signalled.load(Ordering::Relaxed) {
            true => Err("stopping: a signal was received".into()),
            false => Ok(()),
        });
    }
    // The signal thread stops the controller itself (at once if the signal came already):
    // requests in flight and a running exec plugin end, whatever this thread is busy with.
    {
        let c = controller.clone();
        stop.on_signal(move || c.stop());
    }
    let stop = stop.channel();
    // Serving before leader election and start: a standby replica must answer its probes,
    // and /readyz says 503 while the cache syncs.
    let ops = match &args.health_addr {
        Some(addr) => {
            let mut sources = OpsSources::for_controller(&controller);
            if let Some(m) = &leader_metrics {
                sources = sources.metrics(m.clone());
            }
            // OpsServer::start announces the address it bound (once).
            let server = OpsServer::start(addr, sources)
                .map_err(|e| Failure::failed(format!("cannot serve --health-addr {addr}: {e}")))?;
            Some(server)
        }
        None => None,
    };
    let stop_all = |ops: Option<OpsServer>, code: i32| {
        if let Some(ops) = ops {
            ops.shutdown();
        }
        controller.shutdown();
        Ok(code)
    };
    // Before the lease and any write; a signal meanwhile ends the question, and the wait
    // for the lease then ends as it would have.
    let within = match args.once {
        true => deadline.saturating_duration_since(Instant::now()),
        false => server_version::ASK_WITHIN,
    };
    if let Some(refusal) =
        server_version::too_old(&client, &asking, within.min(server_version::ASK_WITHIN))
    {
        stop_all(ops, exit::FAILED)?;
        return Err(Failure::failed(refusal));
    }
    // A standby starts no controller threads and writes nothing; a signal still ends the wait.
    let leader = if args.leader_elect {
        let until = args.once.then_some(deadline);
        let metrics = leader_metrics
            .clone()
            .unwrap_or_else(|| LeaderMetrics::new(""));
        match become_leader(args, &controller, &identity, metrics, stop, until)? {
            Ok(handle) => Some(handle),
            Err(End::Signal) => {
                info!("signal received before becoming leader, stopping");
                // A Job's `--once` that never converged did not succeed.
                return stop_all(ops, if args.once { exit::FAILED } else { exit::OK });
            }
            Err(_) => return stop_all(ops, exit::FAILED),
        }
    } else {
        None
    };
    let lost = leader.as_ref().map_or_else(never, |h| h.lost());
    if let Some(handle) = &leader {
        // Asked right before every write: judged on the clock, so a leader frozen past its
        // renew deadline writes nothing when it resumes, before its elector even notices.
        let h = handle.clone();
        let signalled = signalled.clone();
        controller.set_write_gate(move || {
            if signalled.load(Ordering::Relaxed) {
                Err("stopping: a signal was received".into())
            } else if h.is_leader() {
                Ok(())
            } else {
                Err("not leading: no renewal within the renew deadline".into())
            }
        });
    }
    // A standby may have waited a long time: what counts is PATH as it is now that we lead.
    let loaded = if leader.is_some() {
        manifests.load()
    } else {
        loaded
    };
    report_reload(&controller, &loaded, manifests.path());
    let mut applied = Arc::default();
    apply(&controller, &mut applied, loaded.desired);
    controller.start();
    info!(
        "started: {}, {}",
        text::count(applied.len(), "desired APIService"),
        text::count(args.workers, "worker")
    );

    let end = if args.once {
        once(args, &controller, stop, &lost, deadline)
    } else {
        keep_running(&controller, &mut manifests, &mut applied, stop, &lost)
    };
    if let Some(ops) = ops {
        ops.shutdown();
    }
    controller.shutdown();
    // Only once the controller no longer writes: the release lets a successor start at once.
    // A lost lease is not ours to release.
    if let Some(handle) = &leader {
        if end == End::Lost {
            handle.stop();
        } else {
            handle.release_and_stop();
        }
    }
    info!("stopped");
    Ok(match end {
        End::Converged => exit::OK,
        End::Signal if !args.once => exit::OK,
        _ => exit::FAILED,
    })
}

/// A signal came before the controller existed (while the manifests or the kubeconfig were
/// read): nothing was sent. The same outcome as a signal later: exit 0, or under `--once`
/// exit 1 with its summary (a Job must not read it as success).
fn stopped_starting(args: &RunArgs, stop: &Stop, desired: usize) -> i32 {
    stop.wait_announced();
    if args.once {
        error!(
            "stopped by a signal before converging (0 of {} converged)",
            text::count(desired, "APIService")
        );
        return exit::FAILED;
    }
    info!("stopped");
    exit::OK
}

/// `--once`: converge and end, or end naming what failed at `deadline`.
fn once(
    args: &RunArgs,
    controller: &Controller,
    stop: &Receiver<i32>,
    lost: &Receiver<()>,
    deadline: Instant,
) -> End {
    let mut next_progress = deadline_after(Instant::now(), PROGRESS_EVERY);
    loop {
        // A signal or a loss stops the controller, which ends this wait at once.
        let now = Instant::now();
        let slice = deadline.min(next_progress).saturating_duration_since(now);
        let result = controller.wait_converged(slice);
        if result.is_err() && controller.is_stopped() {
            // Stopped by the signal thread or the elector, whose message follows at once.
            select! {
                recv(stop) -> _ => {}
                recv(lost) -> _ => {
                    error!("leader election lost; exiting so a restart competes afresh");
                    return End::Lost;
                }
                default(Duration::from_secs(1)) => {}
            }
            let (done, total) = controller.progress();
            error!(
                "stopped by a signal before converging ({done} of {} converged)",
                text::count(total, "APIService")
            );
            return End::Signal;
        }
        if stop.try_recv().is_ok() {
            let (done, total) = controller.progress();
            error!(
                "stopped by a signal before converging ({done} of {} converged)",
                text::count(total, "APIService")
            );
            return End::Signal;
        }
        if lost.try_recv().is_ok() {
            error!("leader election lost; exiting so a restart competes afresh");
            return End::Lost;
        }
        match result {
            Ok(()) => {
                let (_, total) = controller.progress();
                info!("converged: {}", text::count(total, "APIService"));
                if args.wait_available {
                    match super::available::wait(controller, deadline) {
                        super::available::Available::Yes => {}
                        super::available::Available::Stopped => return End::Signal,
                        super::available::Available::TimedOut => {
                            controller.events().flush(EVENT_FLUSH);
                            return End::TimedOut;
                        }
                    }
                }
                // The Events of this run's writes, before shutdown drops what is queued.
                controller.events().flush(EVENT_FLUSH);
                return End::Converged;
            }
            Err(pending) if !pending.is_empty() && pending.iter().all(|p| p.blocked) => {
                let n = pending.len();
                error!(
                    "not converged: {} will not converge by waiting (not ours to write, refused \
                     by the server, or their CA source gives no usable bundle):",
                    text::count(n, "APIService")
                );
                for line in by_cause(&pending) {
                    error!("  {line}");
                }
                // The NotOwned / EmptySetRefused / Rejected Events say the same on the objects.
                controller.events().flush(EVENT_FLUSH);
                return End::Blocked;
            }
            Err(pending) if Instant::now() >= deadline => {
                report_timeout(args.timeout, controller, &pending);
                controller.events().flush(EVENT_FLUSH);
                return End::TimedOut;
            }
            Err(_) => {}
        }
        if Instant::now() >= next_progress {
            let (done, total) = controller.progress();
            info!(
                "converging: {done} of {} converged",
                text::count(total, "APIService")
            );
            next_progress = deadline_after(Instant::now(), PROGRESS_EVERY);
        }
    }
}

/// One summary instead of a line per name: counts, then each cause once with how many
/// names it holds up and the first few of them (a server that cannot be reached is one
/// fact, not one line per name).
fn report_timeout(timeout: Duration, controller: &Controller, pending: &[Pending]) {
    let (done, total) = controller.progress();
    let failed = pending
        .iter()
        .filter(|p| p.reason != NOT_SYNCED_YET)
        .count();
    error!(
        "did not converge within {}: {done} of {} converged, {failed} failed, {} not synced yet",
        text::duration(timeout),
        text::count(total, "APIService"),
        pending.len() - failed
    );
    for line in by_cause(pending) {
        error!("  {line}");
    }
}

/// Causes in order of how many names they hold up (failures before "not synced yet"), each
/// once: `cause: name` for one name, `N APIServices: cause (a, b, … and M more)` for several.
fn by_cause(pending: &[Pending]) -> Vec<String> {
    let mut causes: Vec<(&str, Vec<&str>)> = Vec::new();
    for p in pending {
        match causes.iter_mut().find(|(r, _)| *r == p.reason) {
            Some((_, names)) => names.push(&p.name),
            None => causes.push((&p.reason, vec![&p.name])),
        }
    }
    causes.sort_by_key(|(r, names)| (*r == NOT_SYNCED_YET, std::cmp::Reverse(names.len())));
    causes
        .iter()
        .take(SUMMARY_NAMES)
        .map(|(reason, names)| match names.as_slice() {
            [one] => format!("{one}: {reason}"),
            many => {
                let shown: Vec<&str> = many.iter().take(5).copied().collect();
                let more = many.len() - shown.len();
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                format!(
                    "{} APIServices: {reason} ({}{more})",
                    many.len(),
                    shown.join(", ")
                )
            }
        })
        .collect()
}

/// Runs until a signal, applying settled manifest changes as a diff.
fn keep_running(
    controller: &Controller,
    manifests: &mut Reloader,
    applied: &mut Arc<BTreeMap<String, Desired>>,
    stop: &Receiver<i32>,
    lost: &Receiver<()>,
) -> End {
    let ticker = tick(MANIFEST_POLL);
    // Stuck in a reload this long (a file system that hangs) fails /healthz.
    let heartbeat = controller.liveness().register("manifest-watcher");
    loop {
        select! {
            recv(stop) -> _ => {
                heartbeat.retire();
                return End::Signal;
            }
            recv(lost) -> _ => {
                error!("leader election lost; exiting so a restart competes afresh");
                heartbeat.retire();
                return End::Lost;
            }
            recv(ticker) -> _ => {
                heartbeat.busy_for(MANIFEST_RELOAD_BOUND, "reload");
                let _idle = IdleOnDrop(&heartbeat);
                if let Poll::Changed(loaded) = manifests.poll() {
                    report_reload(controller, &loaded, manifests.path());
                    apply(controller, applied, loaded.desired);
                }
            }
        }
    }
}

/// `--leader-elect`: competes for the Lease and blocks until this process leads, a signal
/// comes (`Err(End::Signal)`; a lease won meanwhile is released) or `until` passes
/// (`Err(End::TimedOut)`, naming who holds the lease).
fn become_leader(
    args: &RunArgs,
    controller: &Controller,
    identity: &str,
    metrics: Arc<LeaderMetrics>,
    stop: &Receiver<i32>,
    until: Option<Instant>,
) -> Result<Result<Arc<LeaderHandle>, End>, Failure> {
    // Its own client (rate limiter, connections), as client-go-based controllers do:
    // renewals must not queue behind the controller's writes. The controller's client
    // logs the rate-limit choice; this one does not repeat it.
    let lease_client = controller
        .client()
        .sibling()
        .map_err(|e| Failure::failed(format!("cannot build the leader-election client: {e}")))?;
    // Losing leadership stops the controller on the elector's thread, before anything else
    // hears of it (the write gate has closed already).
    let c = controller.clone();
    let up = metrics.clone();
    let handle = LeaderElector::start(
        Api::<Lease>::namespaced(lease_client, &args.lease_namespace),
        &args.lease_name,
        identity.to_string(),
        args.leader.clone(),
        LeaderCallbacks::new()
            .on_started_leading(move || up.set_leading(true))
            .on_stopped_leading(move || {
                metrics.set_leading(false);
                c.stop();
            }),
    )
    .map_err(|e| Failure::failed(format!("cannot start leader election: {e}")))?;
    let handle = Arc::new(handle);
    let lease = format!("{}/{}", args.lease_namespace, args.lease_name);
    info!("leader election: waiting for lease {lease} as {identity}");
    loop {
        // The elector logs "leading as" once it acquires the lease.
        if handle.wait_until_leader(LEADER_WAIT_SLICE) {
            return Ok(Ok(handle));
        }
        if stop.try_recv().is_ok() {
            handle.release_and_stop();
            return Ok(Err(End::Signal));
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            let why = match handle.leader() {
                Some(holder) => format!("still waiting for the lease {lease} held by {holder}"),
                None => format!("still waiting for the lease {lease} (no holder seen yet)"),
            };
            error!(
                "did not converge within {}: {why}",
                text::duration(args.timeout)
            );
            handle.release_and_stop();
            return Ok(Err(End::TimedOut));
        }
    }
}

/// Logs what is wrong with a reload and what was kept because of it, and counts it in the
/// controller's metrics; an emptied set that is held gets an Event on each kept APIService.
fn report_reload(controller: &Controller, loaded: &Reloaded, path: &std::path::Path) {
    for e in &loaded.errors {
        warn!("{e} (keeping the last good objects of that file)");
    }
    controller
        .metrics()
        .manifest_reload(if loaded.errors.is_empty() {
            ReloadResult::Ok
        } else {
            ReloadResult::Error
        });
    if loaded.held_empty {
        warn!(
            "{} declares no APIServices any more; keeping the {} registered ones \
             (give --allow-empty to let an empty set deregister them)",
            path.display(),
            loaded.desired.len()
        );
        let note = format!(
            "{} declares no APIServices any more; kept registered (--allow-empty lets an \
             empty set deregister them)",
            path.display()
        );
        for name in loaded.desired.keys() {
            controller
                .events()
                .record(name, None, EventReason::EmptySetRefused, &note);
        }
    }
}

/// Registers what is new or changed and removes what is gone, relative to `applied`.
///
/// Additions first: removing first would let a worker see a momentarily empty desired set
/// when one manifest version replaces every name (and refuse a delete by the empty-set guard).
fn apply(
    controller: &Controller,
    applied: &mut Arc<BTreeMap<String, Desired>>,
    desired: Arc<BTreeMap<String, Desired>>,
) {
    for (name, d) in desired.iter() {
        if applied.get(name) == Some(d) {
            continue;
        }
        if applied.contains_key(name) {
            info!("{name}: changed in the manifests");
        }
        match d.mode {
            SyncMode::OnStart => controller.add_api_service_to_sync_on_start(d.object.clone()),
            SyncMode::Always => controller.add_api_service_to_sync(d.object.clone()),
        }
    }
    for name in applied.keys() {
        if !desired.contains_key(name) {
            info!("{name}: removed from the manifests");
            controller.remove_api_service_to_sync(name);
        }
    }
    *applied = desired;
}

//! `autoregister run`: keep the manifests' APIServices registered until stopped (or converged, with `--once`).

use std::collections::BTreeMap;
use std::time::Duration;

use autoregister::api::Lease;
use autoregister::client::{Api, Client};
use autoregister::controller::decision::{Desired, SyncMode};
use autoregister::controller::manifests::{Poll, Reloaded, Reloader};
use autoregister::controller::{Controller, ControllerOptions};
use autoregister::ops::{OpsServer, OpsSources};
use autoregister::runtime::leader::{
    default_identity, LeaderCallbacks, LeaderConfig, LeaderElector, LeaderHandle,
};
use crossbeam_channel::{never, select, tick, Receiver};
use log::{error, info, warn};

use super::args::RunArgs;
use super::{connect, exit, signals, Failure};

/// How often PATH is checked for changes.
const MANIFEST_POLL: Duration = Duration::from_secs(1);

/// How often the wait for leadership looks for a stop signal.
const LEADER_WAIT_SLICE: Duration = Duration::from_millis(200);

/// Runs `run`; returns the exit code.
pub fn run(args: &RunArgs) -> Result<i32, Failure> {
    let o = &args.ownership;
    let mut manifests = Reloader::new(&args.manifests, &o.label_key, o.allow_empty);
    // Read now so a bad manifest exits 2 at once, before any connection.
    let loaded = manifests.load();
    if !loaded.errors.is_empty() {
        return Err(Failure::usage(loaded.errors));
    }
    let client = connect::client(&args.kube)?;
    let stop = signals::stop_channel()
        .map_err(|e| Failure::failed(format!("cannot install signal handlers: {e}")))?;
    let controller = Controller::new(
        client,
        ControllerOptions {
            workers: args.workers,
            resync: args.resync,
            label_key: o.label_key.clone(),
            adopt: o.adopt,
            allow_empty: o.allow_empty,
            ..ControllerOptions::default()
        },
    );
    // Serving before leader election and start: a standby replica must answer its probes,
    // and /readyz says 503 while the cache syncs.
    let ops = match &args.health_addr {
        Some(addr) => {
            let server = OpsServer::start(addr, OpsSources::for_controller(&controller))
                .map_err(|e| Failure::failed(format!("cannot serve --health-addr {addr}: {e}")))?;
            info!(
                "serving /healthz, /readyz, /metrics on {}",
                server.local_addr()
            );
            Some(server)
        }
        None => None,
    };
    // A standby starts no controller threads and writes nothing; a signal still ends the wait.
    let leader = if args.leader_elect {
        match become_leader(args, controller.client(), &stop)? {
            Some(handle) => Some(handle),
            None => {
                info!("signal received before becoming leader, stopping");
                if let Some(ops) = ops {
                    ops.shutdown();
                }
                controller.shutdown();
                return Ok(exit::OK);
            }
        }
    } else {
        None
    };
    let lost = leader.as_ref().map_or_else(never, LeaderHandle::lost);
    // A standby may have waited a long time: what counts is PATH as it is now that we lead.
    let loaded = if leader.is_some() {
        manifests.load()
    } else {
        loaded
    };
    report_reload(&loaded, manifests.path());
    let mut applied = BTreeMap::new();
    apply(&controller, &mut applied, loaded.desired);
    controller.start();
    info!(
        "started: {} desired APIServices, {} workers",
        applied.len(),
        args.workers
    );

    let code = if args.once {
        once(args, &controller, &stop, &lost)
    } else {
        keep_running(&controller, &mut manifests, &mut applied, &stop, &lost)
    };
    if let Some(ops) = ops {
        ops.shutdown();
    }
    controller.shutdown();
    // Only once the controller no longer writes: the release lets a successor start at once.
    if let Some(handle) = &leader {
        handle.release_and_stop();
    }
    info!("stopped");
    Ok(code)
}

/// `--once`: converge and exit 0, or exit 1 naming what failed after `--timeout`.
fn once(args: &RunArgs, controller: &Controller, stop: &Receiver<i32>, lost: &Receiver<()>) -> i32 {
    // Wait in short slices so a signal still ends the run promptly.
    let deadline = std::time::Instant::now() + args.timeout;
    loop {
        let slice = deadline
            .saturating_duration_since(std::time::Instant::now())
            .min(Duration::from_millis(200));
        match controller.wait_converged(slice) {
            Ok(()) => {
                info!("converged");
                return exit::OK;
            }
            // Only names a guard holds are left: they will not converge by waiting.
            Err(pending) if !pending.is_empty() && pending.iter().all(|p| p.blocked) => {
                error!(
                    "not converged: {} APIServices are not ours to write:",
                    pending.len()
                );
                for p in pending {
                    error!("  {}: {}", p.name, p.reason);
                }
                return exit::FAILED;
            }
            Err(pending) if std::time::Instant::now() >= deadline => {
                error!("did not converge within {:?}:", args.timeout);
                for p in pending {
                    error!("  {}: {}", p.name, p.reason);
                }
                return exit::FAILED;
            }
            Err(_) => {}
        }
        if stop.try_recv().is_ok() {
            info!("signal received, stopping");
            return exit::OK;
        }
        if lost.try_recv().is_ok() {
            error!("leader election lost; exiting so a restart competes afresh");
            return exit::FAILED;
        }
    }
}

/// Runs until a signal, applying settled manifest changes as a diff.
fn keep_running(
    controller: &Controller,
    manifests: &mut Reloader,
    applied: &mut BTreeMap<String, Desired>,
    stop: &Receiver<i32>,
    lost: &Receiver<()>,
) -> i32 {
    let ticker = tick(MANIFEST_POLL);
    loop {
        select! {
            recv(stop) -> _ => {
                info!("signal received, stopping");
                return exit::OK;
            }
            recv(lost) -> _ => {
                error!("leader election lost; exiting so a restart competes afresh");
                return exit::FAILED;
            }
            recv(ticker) -> _ => {
                if let Poll::Changed(loaded) = manifests.poll() {
                    report_reload(&loaded, manifests.path());
                    apply(controller, applied, loaded.desired);
                }
            }
        }
    }
}

/// `--leader-elect`: competes for the Lease and blocks until this process leads.
/// `Ok(None)`: a signal came first (a lease won meanwhile is released).
fn become_leader(
    args: &RunArgs,
    client: &Client,
    stop: &Receiver<i32>,
) -> Result<Option<LeaderHandle>, Failure> {
    // Its own client (rate limiter, connections), as client-go-based controllers do:
    // renewals must not queue behind the controller's writes.
    let lease_client = Client::new(client.config().clone())
        .map_err(|e| Failure::failed(format!("cannot build the leader-election client: {e}")))?;
    let identity = default_identity();
    let handle = LeaderElector::start(
        Api::<Lease>::namespaced(lease_client, &args.lease_namespace),
        &args.lease_name,
        identity.clone(),
        LeaderConfig::default(),
        LeaderCallbacks::new(),
    )
    .map_err(|e| Failure::failed(format!("cannot start leader election: {e}")))?;
    info!(
        "leader election: waiting for lease {}/{} as {identity}",
        args.lease_namespace, args.lease_name
    );
    loop {
        if handle.wait_until_leader(LEADER_WAIT_SLICE) {
            info!("leader election: leading as {identity}");
            return Ok(Some(handle));
        }
        if stop.try_recv().is_ok() {
            handle.release_and_stop();
            return Ok(None);
        }
    }
}

/// Logs what is wrong with a reload and what was kept because of it.
fn report_reload(loaded: &Reloaded, path: &std::path::Path) {
    for e in &loaded.errors {
        warn!("{e} (keeping the last good objects of that file)");
    }
    if loaded.held_empty {
        warn!(
            "{} declares no APIServices any more; keeping the {} registered ones \
             (give --allow-empty to let an empty set deregister them)",
            path.display(),
            loaded.desired.len()
        );
    }
}

/// Registers what is new or changed and removes what is gone, relative to `applied`.
fn apply(
    controller: &Controller,
    applied: &mut BTreeMap<String, Desired>,
    desired: BTreeMap<String, Desired>,
) {
    for name in applied.keys() {
        if !desired.contains_key(name) {
            info!("{name}: removed from the manifests");
            controller.remove_api_service_to_sync(name);
        }
    }
    for (name, d) in &desired {
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
    *applied = desired;
}

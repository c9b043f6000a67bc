//! `autoregister run`: keep the manifests' APIServices registered until stopped (or converged, with `--once`).

use std::collections::BTreeMap;
use std::time::Duration;

use autoregister::controller::decision::{Desired, SyncMode};
use autoregister::controller::manifests::{fingerprint, ManifestSet};
use autoregister::controller::{Controller, ControllerOptions};
use autoregister::ops::{OpsServer, OpsSources};
use crossbeam_channel::{select, tick};
use log::{error, info, warn};

use super::args::RunArgs;
use super::{connect, exit, signals, Failure};

/// How often PATH is checked for changes.
const MANIFEST_POLL: Duration = Duration::from_secs(1);

/// Runs `run`; returns the exit code.
pub fn run(args: &RunArgs) -> Result<i32, Failure> {
    let mut manifests = ManifestSet::new(&args.manifests);
    let loaded = manifests.reload();
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
        },
    );
    let mut applied = BTreeMap::new();
    apply(&controller, &mut applied, loaded.desired);
    // Serving before start lets /readyz answer 503 while the cache syncs.
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
    controller.start();
    info!(
        "started: {} desired APIServices, {} workers",
        applied.len(),
        args.workers
    );

    let code = if args.once {
        once(args, &controller, &stop)
    } else {
        keep_running(&controller, &mut manifests, &mut applied, &stop)
    };
    if let Some(ops) = ops {
        ops.shutdown();
    }
    controller.shutdown();
    info!("stopped");
    Ok(code)
}

/// `--once`: converge and exit 0, or exit 1 naming what failed after `--timeout`.
fn once(args: &RunArgs, controller: &Controller, stop: &crossbeam_channel::Receiver<i32>) -> i32 {
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
    }
}

/// Runs until a signal, applying manifest changes as a diff.
fn keep_running(
    controller: &Controller,
    manifests: &mut ManifestSet,
    applied: &mut BTreeMap<String, Desired>,
    stop: &crossbeam_channel::Receiver<i32>,
) -> i32 {
    let ticker = tick(MANIFEST_POLL);
    let mut seen = fingerprint(manifests.path());
    loop {
        select! {
            recv(stop) -> _ => {
                info!("signal received, stopping");
                return exit::OK;
            }
            recv(ticker) -> _ => {
                let now = fingerprint(manifests.path());
                if now == seen {
                    continue;
                }
                seen = now;
                let loaded = manifests.reload();
                for e in &loaded.errors {
                    warn!("{e} (keeping the last good objects of that file)");
                }
                apply(controller, applied, loaded.desired);
            }
        }
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

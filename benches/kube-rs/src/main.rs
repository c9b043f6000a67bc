//! The bench's baseline: autoregister's job written on kube-rs (kube-client, kube-runtime's
//! watcher and reflector store, tokio), so `benches/real_server.rs` can measure the CPU
//! of both on the same rounds. It keeps every APIService of a manifest folder registered:
//! absent -> POST, spec or labels not as declared -> server-side apply, else nothing.
//!
//! `autoregister-kube-rs run [--once] [--timeout DUR] --label-key KEY --manifests DIR
//! [--kubeconfig FILE] [--context NAME] [--workers N]`: the arguments the bench passes to
//! autoregister. `--once` exits 0 once the watch shows every desired object as declared,
//! 1 after `--timeout` (default 60s); without it, runs until SIGTERM or Ctrl+C.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Config, ResourceExt};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{oneshot, Notify};

/// The field manager of our applies and creates.
const FIELD_MANAGER: &str = "autoregister-kube-rs";
/// The value of the ownership label, as autoregister sets it (`SyncMode::Always`).
const LABEL_VALUE: &str = "true";
/// A failed write is tried again after this pause (or at the name's next watch event).
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// A write with no answer after this long is given up and tried again (kube-client sets no
/// time limit on a request's answer), so one lost answer cannot hold a name for good.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the command line asked for.
struct Args {
    once: bool,
    timeout: Duration,
    label_key: String,
    manifests: PathBuf,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    workers: u16,
}

/// What every reconcile shares: the client's API and the live objects the watch keeps.
struct Ctx {
    api: Api<APIService>,
    live: Store<APIService>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("autoregister-kube-rs: {e}");
            return ExitCode::from(2);
        }
    };
    let desired = match read_manifests(&args.manifests, &args.label_key) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("autoregister-kube-rs: {e}");
            return ExitCode::from(2);
        }
    };
    let client = match client(&args).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("autoregister-kube-rs: kubeconfig: {e}");
            return ExitCode::from(2);
        }
    };
    let run = run(client, &args, desired);
    if !args.once {
        run.await;
        return ExitCode::SUCCESS;
    }
    match tokio::time::timeout(args.timeout, run).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("autoregister-kube-rs: stopped before converging");
            ExitCode::from(1)
        }
        Err(_) => {
            eprintln!(
                "autoregister-kube-rs: not converged after {:?}",
                args.timeout
            );
            ExitCode::from(1)
        }
    }
}

/// The controller until it stops: with `--once`, when the watch shows every desired object
/// as declared (returns true); else on SIGTERM or Ctrl+C (returns whether it had converged).
///
/// A watcher and a reflector store from kube-runtime, and a queue of names that
/// `--workers` tasks take from. The first version used kube-runtime's `Controller`
/// (`for_stream` over a store of the desired objects, `reconcile_on` every name): one name
/// of 1,000 was never created and `--once` never finished; the queue here showed the same
/// (benches/README.md), so the cause was in what both shared: see the start of the workers.
async fn run(client: Client, args: &Args, desired: Vec<APIService>) -> bool {
    let api = Api::<APIService>::all(client);
    let by_name: Arc<HashMap<String, APIService>> =
        Arc::new(desired.iter().map(|o| (o.name_any(), o.clone())).collect());
    let (done_tx, done_rx) = oneshot::channel();
    let progress = Arc::new(Mutex::new(Progress::new(by_name.clone(), done_tx)));
    let queue = Arc::new(Queue::default());
    for name in by_name.keys() {
        queue.add(name);
    }

    // The live objects: one watch on those carrying our label, kept in a store; each
    // event of a desired name queues it.
    let (live, live_writer) = reflector::store::<APIService>();
    let selector = format!("{}={LABEL_VALUE}", args.label_key);
    let watch = {
        let (progress, queue, by_name) = (progress.clone(), queue.clone(), by_name.clone());
        watcher(api.clone(), watcher::Config::default().labels(&selector))
            .default_backoff()
            .reflect(live_writer)
            .for_each(move |ev| {
                match ev {
                    Ok(ev) => {
                        if let Ok(mut p) = progress.lock() {
                            p.observe(&ev);
                        }
                        if let watcher::Event::Apply(o)
                        | watcher::Event::InitApply(o)
                        | watcher::Event::Delete(o) = &ev
                        {
                            let name = o.name_any();
                            if by_name.contains_key(&name) {
                                queue.add(&name);
                            }
                        }
                    }
                    Err(e) => eprintln!("autoregister-kube-rs: watch: {e}"),
                }
                future::ready(())
            })
    };
    // The watch in a task of its own, and the workers only once the store holds the first
    // list: each reconcile waiting for it itself (the first version) left one of them
    // waiting for good in every bench run (suspected: a missed wake-up in
    // `Store::wait_until_ready` with 2 waiters), its name never created.
    let mut watch = tokio::spawn(watch);
    if live.wait_until_ready().await.is_err() {
        eprintln!("autoregister-kube-rs: the watch ended before its first list");
        return false;
    }
    let ctx = Arc::new(Ctx { api, live });
    let workers = (0..args.workers).map(|_| {
        let (ctx, queue, by_name) = (ctx.clone(), queue.clone(), by_name.clone());
        tokio::spawn(async move {
            loop {
                let name = queue.get().await;
                if let Some(want) = by_name.get(&name) {
                    if let Err(e) = reconcile(want, &ctx).await {
                        eprintln!("autoregister-kube-rs: {name}: {e}");
                        // Tried again after a pause (or at its next watch event).
                        let queue = queue.clone();
                        let again = name.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(RETRY_AFTER).await;
                            queue.add(&again);
                        });
                    }
                }
                queue.done(&name);
            }
        })
    });
    let workers: Vec<_> = workers.collect();
    let stop = async {
        if args.once {
            let _ = done_rx.await;
        } else {
            let mut term = match signal(SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("autoregister-kube-rs: SIGTERM: {e}");
                    return;
                }
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
    };
    tokio::select! {
        _ = stop => {}
        // The watch ends only if its stream does (kube-runtime retries errors itself).
        _ = &mut watch => {}
    }
    watch.abort();
    for w in workers {
        w.abort();
    }
    progress.lock().is_ok_and(|p| p.converged())
}

/// Names waiting for a worker, each at most once, and none taken by two workers at once
/// (client-go's workqueue: a name added while it is worked on is queued again after).
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Notify,
}

#[derive(Default)]
struct QueueState {
    order: VecDeque<String>,
    queued: HashSet<String>,
    working: HashSet<String>,
}

impl Queue {
    fn add(&self, name: &str) {
        let Ok(mut s) = self.state.lock() else { return };
        if s.queued.insert(name.to_string()) && !s.working.contains(name) {
            s.order.push_back(name.to_string());
            drop(s);
            self.ready.notify_one();
        }
    }

    async fn get(&self) -> String {
        loop {
            let notified = self.ready.notified();
            if let Ok(mut s) = self.state.lock() {
                if let Some(name) = s.order.pop_front() {
                    s.queued.remove(&name);
                    s.working.insert(name.clone());
                    return name;
                }
            }
            notified.await;
        }
    }

    fn done(&self, name: &str) {
        let Ok(mut s) = self.state.lock() else { return };
        s.working.remove(name);
        // Added while worked on: its turn now.
        if s.queued.contains(name) {
            s.order.push_back(name.to_string());
            drop(s);
            self.ready.notify_one();
        }
    }
}

/// One desired object against the live one the watch holds: create, apply, or nothing.
async fn reconcile(want: &APIService, ctx: &Ctx) -> Result<(), Failed> {
    let name = want.name_any();
    match ctx.live.get(&ObjectRef::new(&name)) {
        None => {
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            match timed(ctx.api.create(&pp, want)).await {
                Ok(_) => {}
                // Created since the store saw it: its watch event queues it again.
                Err(Failed::Kube(kube::Error::Api(s))) if s.is_already_exists() => {}
                Err(e) => return Err(e),
            }
        }
        Some(have) if !as_declared(want, &have) => {
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            timed(ctx.api.patch(&name, &pp, &Patch::Apply(want))).await?;
        }
        Some(_) => {}
    }
    Ok(())
}

/// Why a write failed: the server or the connection said so, or nothing came in time.
#[derive(Debug)]
enum Failed {
    Kube(kube::Error),
    Timeout,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Kube(e) => e.fmt(f),
            Failed::Timeout => write!(f, "no answer in {WRITE_TIMEOUT:?}"),
        }
    }
}

/// `write`, given up after [`WRITE_TIMEOUT`].
async fn timed<T>(
    write: impl future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, Failed> {
    match tokio::time::timeout(WRITE_TIMEOUT, write).await {
        Ok(r) => r.map_err(Failed::Kube),
        Err(_) => Err(Failed::Timeout),
    }
}

/// Whether the live object has the declared spec and carries every declared label.
fn as_declared(want: &APIService, have: &APIService) -> bool {
    want.spec == have.spec
        && want
            .labels()
            .iter()
            .all(|(k, v)| have.labels().get(k) == Some(v))
}

/// Which desired names the watch does not yet show as declared, for `--once`: updated per
/// event, so the check costs one lookup, not a pass over every name.
struct Progress {
    desired: Arc<HashMap<String, APIService>>,
    pending: HashSet<String>,
    listed: bool,
    done: Option<oneshot::Sender<()>>,
}

impl Progress {
    fn new(desired: Arc<HashMap<String, APIService>>, done: oneshot::Sender<()>) -> Progress {
        let pending = desired.keys().cloned().collect();
        Progress {
            desired,
            pending,
            listed: false,
            done: Some(done),
        }
    }

    fn observe(&mut self, ev: &watcher::Event<APIService>) {
        match ev {
            watcher::Event::Init => {
                self.pending = self.desired.keys().cloned().collect();
                self.listed = false;
            }
            watcher::Event::InitDone => self.listed = true,
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                let name = o.name_any();
                if let Some(want) = self.desired.get(&name) {
                    if as_declared(want, o) {
                        self.pending.remove(&name);
                    } else {
                        self.pending.insert(name);
                    }
                }
            }
            watcher::Event::Delete(o) => {
                let name = o.name_any();
                if self.desired.contains_key(&name) {
                    self.pending.insert(name);
                }
            }
        }
        if self.converged() {
            if let Some(tx) = self.done.take() {
                let _ = tx.send(());
            }
        }
    }

    fn converged(&self) -> bool {
        self.listed && self.pending.is_empty()
    }
}

/// The client of `--kubeconfig` (else the usual search: $KUBECONFIG, ~/.kube/config,
/// in-cluster), with `--context`.
async fn client(args: &Args) -> Result<Client, Box<dyn std::error::Error>> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            Config::from_custom_kubeconfig(Kubeconfig::read_from(path)?, &options).await?
        }
        None => Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

/// Every APIService in the manifest folder's *.yaml, *.yml and *.json files (or the one
/// file named), each labelled `key: "true"` as autoregister labels what it registers.
fn read_manifests(path: &Path, key: &str) -> Result<Vec<APIService>, String> {
    let files = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
            })
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let docs: Vec<Option<APIService>> =
            serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        for mut o in docs.into_iter().flatten() {
            let name = o.name_any();
            if !seen.insert(name.clone()) {
                return Err(format!("{}: {name} declared twice", file.display()));
            }
            o.labels_mut()
                .insert(key.to_string(), LABEL_VALUE.to_string());
            // What the server stores, so a comparison with the live object is exact.
            o.metadata = kube::api::ObjectMeta {
                name: Some(name),
                labels: Some(std::mem::take(o.labels_mut())),
                annotations: o.metadata.annotations.take(),
                ..Default::default()
            };
            if let Some(svc) = o.spec.as_mut().and_then(|s| s.service.as_mut()) {
                svc.port.get_or_insert(443);
            }
            o.status = None;
            out.push(o);
        }
    }
    Ok(out)
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    const USAGE: &str = "usage: autoregister-kube-rs run [--once] [--timeout DUR] --label-key KEY \
                         --manifests PATH [--kubeconfig FILE] [--context NAME] [--workers N]";
    if it.next().as_deref() != Some("run") {
        return Err(USAGE.into());
    }
    let mut once = false;
    let mut timeout = Duration::from_secs(60);
    let (mut label_key, mut manifests, mut kubeconfig, mut context) = (None, None, None, None);
    let mut workers = 2;
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (a, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--once" => once = true,
            "--timeout" => timeout = parse_duration(&value()?)?,
            "--label-key" => label_key = Some(value()?),
            "--manifests" => manifests = Some(PathBuf::from(value()?)),
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value()?)),
            "--context" => context = Some(value()?),
            "--workers" => {
                let v = value()?;
                workers = v
                    .parse()
                    .ok()
                    .filter(|w| *w >= 1)
                    .ok_or_else(|| format!("--workers {v}: want 1 to 65535"))?;
            }
            _ => return Err(format!("unknown argument {flag}\n{USAGE}")),
        }
    }
    Ok(Args {
        once,
        timeout,
        label_key: label_key.ok_or_else(|| format!("--label-key is required\n{USAGE}"))?,
        manifests: manifests.ok_or_else(|| format!("--manifests is required\n{USAGE}"))?,
        kubeconfig,
        context,
        workers,
    })
}

/// `500ms`, `30s`, `2m`, `1h`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let units: BTreeMap<&str, f64> = [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)]
        .into_iter()
        .collect();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let scale = units
        .get(unit)
        .ok_or_else(|| format!("bad duration {s:?}: unit ms, s, m or h"))?;
    Ok(Duration::from_secs_f64(n * scale))
}

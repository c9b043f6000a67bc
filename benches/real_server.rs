//! The controller on the real kube-apiserver (`make kube`): converging N APIServices with
//! `run --once`, 2 workers, beside the raw floor measured in the same run — the same N
//! writes sent from 2 keep-alive connections, no controller — for creates and for updates
//! of every object, median of R rounds, each round on fresh names. The floor is measured
//! with the write the controller makes (server-side apply) and with create/update, so the
//! cost of apply to the server shows as its own ratio. Each run prints a line: its time, the
//! CPU of the controller, kube-apiserver and etcd, the APIService watch events sent and every
//! request kube-apiserver answered by verb, resource and code (its `/metrics` before and
//! after), to find what slow rounds do.
//!
//! Then `explain` of 50 unavailable APIServices spread over 5 namespaces: its time and the
//! requests kube-apiserver answered for it (reads are batched per namespace and kind, so
//! they grow with namespaces, not with APIServices).
//!
//! `cargo bench --features testing --bench real_server -- [--rounds R] [--n N] [--explain-only]`
//! `BENCH_BINS=label=path,...` names the binaries (default: the release build).

#[path = "../tests/support/bench.rs"]
mod bench;
#[path = "../tests/support/binary.rs"]
mod binary;
#[path = "../tests/support/kube.rs"]
mod kube;
#[path = "../tests/support/procfs.rs"]
mod procfs;
#[path = "../tests/support/promtext.rs"]
mod promtext;

use bench::{binaries, median};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use autoregister::api::{APIService, APIServiceSpec, Resource, ServiceReference};
use autoregister::client::{Api, ListParams};

const WORKERS: usize = 2;
const LABEL: &str = "bench.autoregister.test/owner";

fn main() {
    let mut rounds = 5usize;
    let mut n = 1000usize;
    let mut explain_only = false;
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(a) = args.next() {
        let mut num = || args.next().and_then(|v| v.parse().ok());
        match a.as_str() {
            "--rounds" => rounds = num().unwrap_or(rounds),
            "--n" => n = num().unwrap_or(n),
            "--explain-only" => explain_only = true,
            _ => {}
        }
    }
    let k = kube::kube();
    let bins = binaries();
    if !explain_only {
        converge(k, &bins, n, rounds);
    }
    explain(k, &bins, rounds);
}

/// `explain` of [`EXPLAINED`] APIServices, none served, in [`EXPLAIN_NAMESPACES`]
/// namespaces: the median time and the requests of the last run.
fn explain(k: &kube::Kube, bins: &[(String, String)], rounds: usize) {
    const EXPLAINED: usize = 50;
    const EXPLAIN_NAMESPACES: usize = 5;
    let api = Api::<APIService>::all(k.client());
    let mut names = Vec::new();
    for ns in 0..EXPLAIN_NAMESPACES {
        let svc = k.loopback_service(&format!("bench-explain-{ns}"), "api");
        for i in 0..EXPLAINED / EXPLAIN_NAMESPACES {
            let group = format!("e{ns}x{i}.explain.bench.example.com");
            let mut o = APIService::new(
                format!("v1.{group}"),
                APIServiceSpec {
                    group: group.clone().into(),
                    version: "v1".into(),
                    group_priority_minimum: 100,
                    version_priority: 10,
                    insecure_skip_tls_verify: true,
                    // Every other one points at a Service that does not exist, the rest at
                    // one whose endpoint refuses: different links of the chain.
                    service: Some(ServiceReference {
                        namespace: svc.namespace.clone().into(),
                        name: if i % 2 == 0 {
                            "api".into()
                        } else {
                            "gone".into()
                        },
                        port: Some(i32::from(svc.port)),
                        extra: Default::default(),
                    }),
                    ..Default::default()
                },
            );
            o.metadata.labels = Some(
                [(LABEL.to_string(), "explain".to_string())]
                    .into_iter()
                    .collect(),
            );
            let _ = api.delete(o.name(), &Default::default());
            api.create(&o)
                .unwrap_or_else(|e| panic!("create {}: {e}", o.name()));
            names.push(o.name().to_string());
        }
    }
    // Each has its condition before anything is timed.
    let start = Instant::now();
    while !names.iter().all(|n| {
        api.get(n)
            .ok()
            .and_then(|o| o.status)
            .and_then(|s| s.conditions)
            .is_some_and(|c| !c.is_empty())
    }) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no conditions after 2 min"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let kc = k.scratch("bench-explain").join("kubeconfig");
    std::fs::write(&kc, k.kubeconfig(kube::ADMIN_TOKEN)).unwrap();
    println!();
    println!("| explain, {EXPLAINED} APIServices not served in {EXPLAIN_NAMESPACES} namespaces | median of {rounds} | requests (last run) |");
    println!("|---|---|---|");
    for (label, path) in bins {
        let mut times = Vec::new();
        let mut requests = String::new();
        for _ in 0..rounds {
            let before = Seen::now(k);
            let t = Instant::now();
            let out = Command::new(path)
                .args([
                    "explain",
                    "--kubeconfig",
                    kc.to_str().unwrap(),
                    "-o",
                    "json",
                ])
                .output()
                .expect("explain runs");
            times.push(t.elapsed());
            assert_eq!(
                out.status.code(),
                Some(1),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let doc: serde_json::Value =
                serde_json::from_slice(&out.stdout).expect("explain -o json");
            assert!(
                doc["items"]
                    .as_array()
                    .is_some_and(|i| i.len() >= EXPLAINED),
                "{doc}"
            );
            requests = Seen::now(k).requests_since(&before);
        }
        println!(
            "| autoregister ({label}) | {} | {requests} |",
            secs(median(times))
        );
    }
    clean(k, 0);
}

/// `run --once` converging `n` APIServices beside the raw floors, `rounds` times.
fn converge(k: &kube::Kube, bins: &[(String, String)], n: usize, rounds: usize) {
    println!("real kube-apiserver, {n} APIServices, {WORKERS} workers, median of {rounds} rounds");
    let mut results: Vec<(String, Vec<Duration>, Vec<Duration>)> = Vec::new();
    let mut floors = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut round_id = 0;
    for _ in 0..rounds {
        // The floors: create/update with POST/PUT, and with server-side apply.
        for (i, apply) in [false, true].into_iter().enumerate() {
            for (j, update) in [false, true].into_iter().enumerate() {
                round_id += 1;
                let objs = objects(n, round_id, if update { 20 } else { 10 });
                let (took, seen) = floor(k, &objs, apply, update);
                println!(
                    "  round {round_id} floor {} {}: {:.2} s, {seen}",
                    if apply { "apply" } else { "POST/PUT" },
                    if update { "update" } else { "create" },
                    took.as_secs_f64(),
                );
                floors[i * 2 + j].push(took);
                clean(k, round_id);
            }
        }
        for (label, path) in bins {
            round_id += 1;
            let (create, update) = controller(k, label, path, n, round_id);
            clean(k, round_id);
            match results.iter_mut().find(|r| &r.0 == label) {
                Some(r) => {
                    r.1.push(create);
                    r.2.push(update);
                }
                None => results.push((label.clone(), vec![create], vec![update])),
            }
        }
    }
    let per_round = floors.clone();
    let [fc, fu, ac, au] = floors.map(median);
    println!();
    println!("| what | create {n} | update {n} |");
    println!("|---|---|---|");
    println!("| raw floor, POST / PUT | {} | {} |", secs(fc), secs(fu));
    println!(
        "| raw floor, server-side apply | {} ({:.2}×) | {} ({:.2}×) |",
        secs(ac),
        ratio(ac, fc),
        secs(au),
        ratio(au, fu)
    );
    for (label, c, u) in results {
        // Each run against its own round's floor: kube-apiserver's CPU for the same writes
        // drifts between rounds (GC, its own controllers), which a median floor hides.
        let rounds_c: Vec<f64> = (c.iter().zip(&per_round[0]))
            .map(|(c, f)| ratio(*c, *f))
            .collect();
        let rounds_u: Vec<f64> = (u.iter().zip(&per_round[3]))
            .map(|(u, f)| ratio(*u, *f))
            .collect();
        let (worst_c, worst_u) = (*c.iter().max().unwrap(), *u.iter().max().unwrap());
        let (c, u) = (median(c), median(u));
        println!(
            "| autoregister ({label}), median | {} ({:.2}× POST, {:.2}× apply) | {} ({:.2}× PUT, {:.2}× apply) |",
            secs(c),
            ratio(c, fc),
            ratio(c, ac),
            secs(u),
            ratio(u, fu),
            ratio(u, au)
        );
        println!(
            "| autoregister ({label}), slowest | {} ({:.2}× POST) | {} ({:.2}× PUT) |",
            secs(worst_c),
            ratio(worst_c, fc),
            secs(worst_u),
            ratio(worst_u, fu)
        );
        println!(
            "| autoregister ({label}), to its round's floor | median {}, worst {} (POST) | median {}, worst {} (apply) |",
            fmt_ratio(median(rounds_c.clone())),
            fmt_ratio(rounds_c.iter().copied().fold(0.0, f64::max)),
            fmt_ratio(median(rounds_u.clone())),
            fmt_ratio(rounds_u.iter().copied().fold(0.0, f64::max)),
        );
    }
}

fn fmt_ratio(r: f64) -> String {
    format!("{r:.2}×")
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn group(i: usize, round: usize) -> String {
    format!("g{i}.r{round}.bench.example.com")
}

fn spec(i: usize, round: usize, priority: i32) -> APIServiceSpec {
    APIServiceSpec {
        service: Some(ServiceReference {
            namespace: "bench".into(),
            name: "api".into(),
            port: Some(443),
            ..Default::default()
        }),
        group: group(i, round).as_str().into(),
        version: "v1".into(),
        insecure_skip_tls_verify: true,
        group_priority_minimum: 100,
        version_priority: priority,
        ..Default::default()
    }
}

/// The N objects of a round, labelled as the controller labels what it creates.
fn objects(n: usize, round: usize, priority: i32) -> Vec<APIService> {
    (0..n)
        .map(|i| {
            let mut a =
                APIService::new(format!("v1.{}", group(i, round)), spec(i, round, priority));
            a.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(LABEL.into(), "true".into());
            a
        })
        .collect()
}

/// The N writes from `WORKERS` keep-alive connections: creates, or (with `update`) updates
/// of the objects created just before (not timed); with `apply`, as server-side applies.
/// Also what the server did meanwhile (as [`Seen::since`] says it).
fn floor(k: &kube::Kube, objs: &[APIService], apply: bool, update: bool) -> (Duration, String) {
    let apis: Vec<Api<APIService>> = (0..WORKERS)
        .map(|_| Api::all(k.client()).with_field_manager("bench"))
        .collect();
    let mut objs = objs.to_vec();
    if update {
        let mut first = objs.clone();
        for o in &mut first {
            o.spec.version_priority = 10;
        }
        write_all(&apis, &first, false, false);
        // kube-apiserver's availability controller writes each new APIService's status
        // once (Available=False: no such Service): read the resourceVersions after that,
        // or the updates race it and meet 409s.
        let stored = loop {
            let listed = Api::<APIService>::all(k.client())
                .list(&ListParams {
                    label_selector: Some(LABEL.into()),
                    ..Default::default()
                })
                .unwrap();
            let settled = listed.items.iter().all(|o| {
                o.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| !c.is_empty())
            });
            if settled {
                break listed;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        for o in &mut objs {
            let rv = stored
                .items
                .iter()
                .find(|s| s.metadata.name == o.metadata.name)
                .and_then(|s| s.metadata.resource_version.clone());
            o.metadata.resource_version = rv;
        }
    }
    let before = Seen::now(k);
    let start = Instant::now();
    write_all(&apis, &objs, apply, update);
    let took = start.elapsed();
    (took, Seen::now(k).since(&before, 0.0))
}

fn write_all(apis: &[Api<APIService>], objs: &[APIService], apply: bool, update: bool) {
    std::thread::scope(|s| {
        for (w, api) in apis.iter().enumerate() {
            s.spawn(move || {
                for o in objs.iter().skip(w).step_by(apis.len()) {
                    let r = if apply {
                        let mut body = o.clone();
                        body.metadata.resource_version = None;
                        api.apply_unread(&body, true)
                    } else if update {
                        api.update_unread(o)
                    } else {
                        api.create_unread(o)
                    };
                    r.unwrap();
                }
            });
        }
    });
}

/// `run --once` converging the round's N creates, then N updates: (create, update) times.
fn controller(
    k: &kube::Kube,
    label: &str,
    bin: &str,
    n: usize,
    round: usize,
) -> (Duration, Duration) {
    let dir = k.scratch(&format!("bench-{round}"));
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, binary::Target::kubeconfig_text(k)).unwrap();
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let mut times = Vec::new();
    for priority in [10, 20] {
        let docs: Vec<String> = objects(n, round, priority)
            .iter()
            .map(|o| serde_json::to_string(o).unwrap())
            .collect();
        std::fs::write(manifests.join("all.yaml"), docs.join("\n---\n")).unwrap();
        let before = Seen::now(k);
        let start = Instant::now();
        // `times` after the run prints the controller's user and system CPU (the shell's
        // children's), which /proc no longer has once it exited.
        let out = Command::new("sh")
            .args(["-c", "\"$0\" \"$@\" >/dev/null && times"])
            .arg(bin)
            .args(["run", "--once", "--timeout", "300s", "--label-key", LABEL])
            .arg("--manifests")
            .arg(&manifests)
            .arg("--kubeconfig")
            .arg(&kc)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let took = start.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cpu = children_cpu(&String::from_utf8_lossy(&out.stdout));
        let what = if priority == 10 { "create" } else { "update" };
        println!(
            "  round {round} {label} {what}: {:.2} s, {}",
            took.as_secs_f64(),
            Seen::now(k).since(&before, cpu)
        );
        times.push(took);
    }
    (times[0], times[1])
}

/// The children's user + system CPU from the second line `times` prints (`0m0.19s 0m0.04s`).
fn children_cpu(times: &str) -> f64 {
    let line = times.lines().last().unwrap_or("");
    line.split_whitespace()
        .filter_map(|t| {
            let (m, s) = t.trim_end_matches('s').split_once('m')?;
            Some(m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
        })
        .sum()
}

/// What kube-apiserver had done at one moment: CPU of it and of etcd, its requests by verb,
/// resource and code, and the watch events it sent for APIServices.
struct Seen {
    apiserver_cpu: f64,
    etcd_cpu: f64,
    requests: BTreeMap<String, f64>,
    watch_events: f64,
}

impl Seen {
    fn now(k: &kube::Kube) -> Seen {
        let ticks = procfs::clock_ticks();
        let cpu = |name| {
            k.pid(name)
                .map_or(0.0, |pid| procfs::cpu_ticks(pid) as f64 / ticks)
        };
        let (ok, text, err) = k.kubectl(&["get", "--raw", "/metrics"]);
        assert!(ok, "{err}");
        let metrics = promtext::parse(&text).unwrap_or_else(|e| panic!("/metrics: {e}"));
        let mut requests = BTreeMap::new();
        for s in metrics.all("apiserver_request_total") {
            let l = |k: &str| s.labels.get(k).map(String::as_str).unwrap_or("");
            if l("resource").is_empty() {
                continue;
            }
            let sub = if l("subresource").is_empty() {
                String::new()
            } else {
                format!("/{}", l("subresource"))
            };
            let key = format!("{} {}{sub} {}", l("verb"), l("resource"), l("code"));
            *requests.entry(key).or_default() += s.value;
        }
        let watch_events = metrics
            .all("apiserver_watch_events_total")
            .iter()
            .filter(|s| s.labels.get("resource").map(String::as_str) == Some("apiservices"))
            .map(|s| s.value)
            .sum();
        Seen {
            apiserver_cpu: cpu("kube-apiserver"),
            etcd_cpu: cpu("etcd"),
            requests,
            watch_events,
        }
    }

    /// One line: the CPU each process used since `before` and the requests kube-apiserver
    /// answered since then (all clients: the controller and kube-apiserver's own loops).
    fn since(&self, before: &Seen, controller_cpu: f64) -> String {
        format!(
            "CPU controller {controller_cpu:.2} s, kube-apiserver {:.2} s, etcd {:.2} s; \
             watch events (apiservices) {}; requests:{}",
            self.apiserver_cpu - before.apiserver_cpu,
            self.etcd_cpu - before.etcd_cpu,
            self.watch_events - before.watch_events,
            self.requests_since(before)
        )
    }

    /// The requests kube-apiserver answered since `before`, as ` VERB RESOURCE CODE ×N`.
    fn requests_since(&self, before: &Seen) -> String {
        let mut line = String::new();
        for (key, n) in &self.requests {
            let d = n - before.requests.get(key).copied().unwrap_or(0.0);
            if d > 0.0 {
                line.push_str(&format!(" {key} ×{d}"));
            }
        }
        line
    }
}

/// Deletes a round's objects (not timed).
fn clean(k: &kube::Kube, _round: usize) {
    let (ok, out, err) = k.kubectl(&["delete", "apiservices", "-l", LABEL, "--wait=false"]);
    assert!(ok, "{out}{err}");
    let api = Api::<APIService>::all(k.client());
    while !api
        .list(&ListParams {
            label_selector: Some(LABEL.into()),
            ..Default::default()
        })
        .unwrap()
        .items
        .is_empty()
    {
        std::thread::sleep(Duration::from_millis(200));
    }
}

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
//! CPU is reported per 1,000 objects beside a bare client's: the floor's writes are made by
//! this crate's own `Client` on 2 threads whose CPU is read from /proc/thread-self/schedstat,
//! so each controller run has, in its own round, the CPU of the same requests with nothing
//! else done (the least a controller could spend). A third run per binary and round keeps a
//! long-running controller (no `--once`) over N fresh creates and reads its CPU over the
//! 5 s after the server holds them all: the status storm (kube-aggregator writes each new
//! APIService's status) and idling.
//!
//! A binary labelled `kube-rs` (`make bench` builds benches/kube-rs: the same job as a
//! kube-runtime `Controller` on tokio) is measured in the same rounds as the others, and
//! every candidate's CPU is also shown as a ratio to its CPU in the same round (the issue's
//! goal: autoregister at most 0.8× a kube-rs controller's). `explain` skips it.
//!
//! `cargo bench --features testing --bench real_server -- [--rounds R] [--n N] [--save FILE] [--compare FILE] [--explain-only]`
//! `BENCH_BINS=label=path,...` names the binaries (default: the release build). `--save`
//! writes the medians as `key value` lines; `--compare` prints this run's change against
//! such a file.

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
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use autoregister::api::{APIService, APIServiceSpec, Resource, ServiceReference};
use autoregister::client::{Api, ListParams};

const WORKERS: usize = 2;
const LABEL: &str = "bench.autoregister.test/owner";
/// How long the long-running controller is watched once the server holds every object.
const IDLE: Duration = Duration::from_secs(5);
/// The `BENCH_BINS` label of the kube-rs baseline (benches/kube-rs): the others' CPU is
/// also given as a ratio to its, and it is not an autoregister (no `explain`).
const BASELINE: &str = "kube-rs";

/// One controller run's figures: times, and CPU seconds of the controller.
#[derive(Clone, Copy, Default)]
struct Run {
    create: Duration,
    create_cpu: f64,
    update: Duration,
    update_cpu: f64,
    /// CPU in the `IDLE` window after the long-running controller's N creates were all stored.
    idle_cpu: f64,
    /// The long-running controller's peak RSS (VmHWM) at the end of the `IDLE` window, KiB.
    idle_peak_kib: u64,
}

/// How a candidate is named in the tables: autoregister by its build, the baseline by itself.
fn who(label: &str) -> String {
    if label == BASELINE {
        "kube-rs 5.0 controller (baseline)".to_string()
    } else {
        format!("autoregister ({label})")
    }
}

fn main() {
    let mut rounds = 5usize;
    let mut n = 1000usize;
    let mut explain_only = false;
    let mut save = None;
    let mut compare = None;
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()).unwrap_or(rounds),
            "--n" => n = args.next().and_then(|v| v.parse().ok()).unwrap_or(n),
            "--save" => save = args.next(),
            "--compare" => compare = args.next(),
            "--explain-only" => explain_only = true,
            _ => {}
        }
    }
    // Read before the run: a missing or garbled file is said at once, not after minutes.
    let baseline = compare.as_ref().map(|f| {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("--compare {f}: {e}"));
        parse_saved(&text).unwrap_or_else(|e| panic!("--compare {f}: {e}"))
    });
    let k = kube::kube();
    let bins = binaries();
    if !explain_only {
        let compare = compare.zip(baseline);
        converge(k, &bins, n, rounds, save, compare);
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
    for (label, path) in bins.iter().filter(|(l, _)| l != BASELINE) {
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
/// `save`: where to write the medians; `compare`: a file of saved ones, read.
fn converge(
    k: &kube::Kube,
    bins: &[(String, String)],
    n: usize,
    rounds: usize,
    save: Option<String>,
    compare: Option<(String, BTreeMap<String, f64>)>,
) {
    println!("real kube-apiserver, {n} APIServices, {WORKERS} workers, median of {rounds} rounds");
    let mut results: Vec<(String, Vec<Run>)> = Vec::new();
    let mut floors = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut floor_cpu = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut round_id = 0;
    for _ in 0..rounds {
        // The floors: create/update with POST/PUT, and with server-side apply.
        for (i, apply) in [false, true].into_iter().enumerate() {
            for (j, update) in [false, true].into_iter().enumerate() {
                round_id += 1;
                let objs = objects(n, round_id, if update { 20 } else { 10 });
                let (took, cpu, seen) = floor(k, &objs, apply, update);
                println!(
                    "  round {round_id} floor {} {}: {:.2} s, {seen}",
                    if apply { "apply" } else { "POST/PUT" },
                    if update { "update" } else { "create" },
                    took.as_secs_f64(),
                );
                floors[i * 2 + j].push(took);
                floor_cpu[i * 2 + j].push(cpu);
                clean(k, round_id);
            }
        }
        for (label, path) in bins {
            round_id += 1;
            let mut run = controller(k, label, path, n, round_id);
            clean(k, round_id);
            round_id += 1;
            (run.idle_cpu, run.idle_peak_kib) = idle(k, label, path, n, round_id);
            clean(k, round_id);
            match results.iter_mut().find(|r| &r.0 == label) {
                Some(r) => r.1.push(run),
                None => results.push((label.clone(), vec![run])),
            }
        }
    }
    let per_round = floors.clone();
    let [fc, fu, ac, au] = floors.map(median);
    // The bare client's CPU for the controller's requests: POST for creates, apply for updates.
    let bare_create = median(floor_cpu[0].clone());
    let bare_update = median(floor_cpu[3].clone());
    let per = |cpu: f64| cpu * 1000.0 / n as f64;
    let mut saved: Vec<(String, f64)> = vec![
        ("bare_client.create_cpu_per_1000".into(), per(bare_create)),
        ("bare_client.update_cpu_per_1000".into(), per(bare_update)),
    ];
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
    let mut cpu_rows = Vec::new();
    // The baseline's runs, round by round, for the ratios to it.
    let baseline_runs = results
        .iter()
        .find(|(l, _)| l == BASELINE)
        .map(|(_, r)| r.clone());
    for (label, runs) in results {
        let name = who(&label);
        let c: Vec<Duration> = runs.iter().map(|r| r.create).collect();
        let u: Vec<Duration> = runs.iter().map(|r| r.update).collect();
        // Each run against its own round's floor: kube-apiserver's CPU for the same writes
        // drifts between rounds (GC, its own controllers), which a median floor hides.
        let rounds_c: Vec<f64> = (c.iter().zip(&per_round[0]))
            .map(|(c, f)| ratio(*c, *f))
            .collect();
        let rounds_u: Vec<f64> = (u.iter().zip(&per_round[3]))
            .map(|(u, f)| ratio(*u, *f))
            .collect();
        // CPU likewise against the bare client of its own round (the machine's speed drifts).
        let cpu_c: Vec<f64> = (runs.iter().zip(&floor_cpu[0]))
            .map(|(r, f)| r.create_cpu / f)
            .collect();
        let cpu_u: Vec<f64> = (runs.iter().zip(&floor_cpu[3]))
            .map(|(r, f)| r.update_cpu / f)
            .collect();
        let (worst_c, worst_u) = (*c.iter().max().unwrap(), *u.iter().max().unwrap());
        let (c, u) = (median(c), median(u));
        println!(
            "| {name}, median | {} ({:.2}× POST, {:.2}× apply) | {} ({:.2}× PUT, {:.2}× apply) |",
            secs(c),
            ratio(c, fc),
            ratio(c, ac),
            secs(u),
            ratio(u, fu),
            ratio(u, au)
        );
        println!(
            "| {name}, slowest | {} ({:.2}× POST) | {} ({:.2}× PUT) |",
            secs(worst_c),
            ratio(worst_c, fc),
            secs(worst_u),
            ratio(worst_u, fu)
        );
        println!(
            "| {name}, to its round's floor | median {}, worst {} (POST) | median {}, worst {} (apply) |",
            fmt_ratio(median(rounds_c.clone())),
            fmt_ratio(rounds_c.iter().copied().fold(0.0, f64::max)),
            fmt_ratio(median(rounds_u.clone())),
            fmt_ratio(rounds_u.iter().copied().fold(0.0, f64::max)),
        );
        let create_cpu = median(runs.iter().map(|r| r.create_cpu).collect());
        let update_cpu = median(runs.iter().map(|r| r.update_cpu).collect());
        let idle_cpu = median(runs.iter().map(|r| r.idle_cpu).collect());
        let (rc, ru) = (median(cpu_c.clone()), median(cpu_u.clone()));
        let spread = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            format!("{lo:.2}–{hi:.2}×")
        };
        let peak_mib = median(runs.iter().map(|r| r.idle_peak_kib).collect()) as f64 / 1024.0;
        // Each run against the baseline's run of the same round: the machine's load moves
        // both alike, which medians taken apart would hide.
        let to_baseline = baseline_runs.as_ref().map(|base| {
            let per_round = |f: fn(&Run) -> f64| -> Vec<f64> {
                runs.iter()
                    .zip(base)
                    // Under 5 ms is no base for a ratio: the kube-rs controller's idle
                    // window reads 0.000-0.001 s, and a ratio to it said 14× for 9 ms.
                    .filter(|(_, b)| f(b) >= 0.005)
                    .map(|(r, b)| f(r) / f(b))
                    .collect()
            };
            [
                per_round(|r| r.create_cpu),
                per_round(|r| r.update_cpu),
                per_round(|r| r.idle_cpu),
            ]
        });
        let baseline_cell = match &to_baseline {
            Some(ratios) => ratios
                .iter()
                .map(|v| {
                    if v.is_empty() {
                        "–".to_string()
                    } else {
                        format!("{:.2}× (rounds {})", median(v.clone()), spread(v))
                    }
                })
                .collect::<Vec<_>>()
                .join(" / "),
            None => String::new(),
        };
        cpu_rows.push(format!(
            "| {name} | {:.3} s ({rc:.2}×, rounds {}) | {:.3} s ({ru:.2}×, rounds {}) | {:.3} s | {peak_mib:.1} MiB |{}",
            per(create_cpu),
            spread(&cpu_c),
            per(update_cpu),
            spread(&cpu_u),
            per(idle_cpu),
            if label == BASELINE {
                " (itself) |".to_string()
            } else if baseline_runs.is_some() {
                format!(" {baseline_cell} |")
            } else {
                String::new()
            },
        ));
        if let Some(ratios) = &to_baseline {
            for (key, v) in ["create", "update", "idle"].iter().zip(ratios) {
                if !v.is_empty() {
                    saved.push((format!("{label}.{key}_cpu_to_kube_rs"), median(v.clone())));
                }
            }
        }
        for (key, v) in [
            ("create_cpu_per_1000", per(create_cpu)),
            ("update_cpu_per_1000", per(update_cpu)),
            ("idle_cpu_per_1000", per(idle_cpu)),
            ("idle_peak_mib", peak_mib),
            ("create_cpu_ratio", rc),
            ("update_cpu_ratio", ru),
            ("create_s", c.as_secs_f64()),
            ("update_s", u.as_secs_f64()),
            ("create_time_ratio", ratio(c, fc)),
            ("update_time_ratio", ratio(u, au)),
        ] {
            saved.push((format!("{label}.{key}"), v));
        }
    }
    println!();
    println!(
        "CPU per 1,000 objects (median; ratio: to the bare client's CPU for the same requests \
         in the same round, POST for creates, apply for updates; idle: the {} s after the \
         long-running controller's creates were all stored, status storm included):",
        IDLE.as_secs()
    );
    if baseline_runs.is_some() {
        println!(
            "To kube-rs: each one's CPU over the kube-rs controller's in the same round, median \
             of the rounds (create / update / idle window). Peak RSS: the long-running \
             controller's VmHWM at the end of its idle window, median."
        );
    }
    println!();
    if baseline_runs.is_some() {
        println!("| what | create | update | idle window | peak RSS | to kube-rs (create / update / idle) |");
        println!("|---|---|---|---|---|---|");
    } else {
        println!("| what | create | update | idle window | peak RSS |");
        println!("|---|---|---|---|---|");
    }
    println!(
        "| bare client (this crate's `Client`, 2 threads, no decoding) | {:.3} s | {:.3} s | | |{}",
        per(bare_create),
        per(bare_update),
        if baseline_runs.is_some() { " |" } else { "" }
    );
    for row in cpu_rows {
        println!("{row}");
    }
    if let Some(file) = save {
        let text: String = saved.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("--save {file}: {e}"));
        println!("\nsaved to {file}");
    }
    if let Some((file, before)) = compare {
        println!("\nchange against {file}:");
        println!();
        println!("| figure | before | now | change |");
        println!("|---|---|---|---|");
        for (key, now) in &saved {
            match before.get(key) {
                Some(b) if *b != 0.0 => println!(
                    "| {key} | {b:.3} | {now:.3} | {:+.1}% |",
                    (now - b) / b * 100.0
                ),
                Some(b) => println!("| {key} | {b:.3} | {now:.3} | |"),
                None => println!("| {key} | (none) | {now:.3} | |"),
            }
        }
    }
}

/// A `--save` file: `key value` lines.
fn parse_saved(text: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let (k, v) = line
            .split_once(' ')
            .ok_or_else(|| format!("line {}: not `key value`: {line:?}", i + 1))?;
        let v = v
            .trim()
            .parse()
            .map_err(|_| format!("line {}: {v:?} is not a number", i + 1))?;
        out.insert(k.to_string(), v);
    }
    Ok(out)
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
/// Also the CPU seconds of the writing threads (the bare client's), and what the server did
/// meanwhile (as [`Seen::since`] says it).
fn floor(
    k: &kube::Kube,
    objs: &[APIService],
    apply: bool,
    update: bool,
) -> (Duration, f64, String) {
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
    let cpu = write_all(&apis, &objs, apply, update);
    let took = start.elapsed();
    (took, cpu, Seen::now(k).since(&before, "client", cpu))
}

/// The writes, one thread per connection; returns the CPU seconds those threads used.
fn write_all(apis: &[Api<APIService>], objs: &[APIService], apply: bool, update: bool) -> f64 {
    std::thread::scope(|s| {
        let threads: Vec<_> = apis
            .iter()
            .enumerate()
            .map(|(w, api)| {
                s.spawn(move || {
                    let start = thread_cpu();
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
                    thread_cpu() - start
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    })
}

/// CPU seconds the calling thread has run (/proc/thread-self/schedstat, in nanoseconds).
fn thread_cpu() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    schedstat_secs(&text)
}

/// The first field of a schedstat line (nanoseconds on CPU) in seconds.
fn schedstat_secs(text: &str) -> f64 {
    text.split_whitespace()
        .next()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// CPU seconds every thread of `pid` has run so far (threads that ended are not counted:
/// the controller's threads live as long as it does).
fn process_cpu(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    tasks
        .filter_map(Result::ok)
        .map(|t| {
            schedstat_secs(&std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default())
        })
        .sum()
}

/// A round's scratch folder with a kubeconfig and the manifest folder, for `priority`.
fn scratch(k: &kube::Kube, n: usize, round: usize) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = k.scratch(&format!("bench-{round}"));
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, binary::Target::kubeconfig_text(k)).unwrap();
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    write_manifests(&manifests, n, round, 10);
    (kc, manifests)
}

fn write_manifests(dir: &std::path::Path, n: usize, round: usize, priority: i32) {
    let docs: Vec<String> = objects(n, round, priority)
        .iter()
        .map(|o| serde_json::to_string(o).unwrap())
        .collect();
    std::fs::write(dir.join("all.yaml"), docs.join("\n---\n")).unwrap();
}

/// `run --once` converging the round's N creates, then N updates: times and CPU.
fn controller(k: &kube::Kube, label: &str, bin: &str, n: usize, round: usize) -> Run {
    let (kc, manifests) = scratch(k, n, round);
    let mut times = Vec::new();
    for priority in [10, 20] {
        write_manifests(&manifests, n, round, priority);
        let before = Seen::now(k);
        let start = Instant::now();
        // `times` after the run prints the controller's user and system CPU (the shell's
        // children's), which /proc no longer has once it exited. bash's, to the
        // millisecond (getrusage); dash's counts 10 ms clock ticks, 3 % of a 0.3 s run.
        let out = Command::new("bash")
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
        let (user, system) = children_cpu(&String::from_utf8_lossy(&out.stdout));
        let cpu = user + system;
        let what = if priority == 10 { "create" } else { "update" };
        // The split says whether a change moved work in the process or in the kernel
        // (syscalls, wake-ups, page faults).
        println!(
            "  round {round} {label} {what}: {:.2} s (user {user:.2} s, system {system:.2} s), {}",
            took.as_secs_f64(),
            Seen::now(k).since(&before, "controller", cpu)
        );
        times.push((took, cpu));
    }
    Run {
        create: times[0].0,
        create_cpu: times[0].1,
        update: times[1].0,
        update_cpu: times[1].1,
        idle_cpu: 0.0,
        idle_peak_kib: 0,
    }
}

/// A long-running controller (no `--once`) over the round's N creates: its CPU in the
/// `IDLE` window that starts once the server holds all N (the status storm falls in it),
/// and its peak RSS at the end of that window (KiB).
fn idle(k: &kube::Kube, label: &str, bin: &str, n: usize, round: usize) -> (f64, u64) {
    let (kc, manifests) = scratch(k, n, round);
    let mut child = Command::new(bin)
        .args(["run", "--label-key", LABEL, "--manifests"])
        .arg(&manifests)
        .arg("--kubeconfig")
        .arg(&kc)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let api = Api::<APIService>::all(k.client());
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        assert!(child.try_wait().unwrap().is_none(), "{label} exited early");
        assert!(
            Instant::now() < deadline,
            "{label}: {n} creates not stored in 300 s"
        );
        let stored = api
            .list(&ListParams {
                label_selector: Some(LABEL.into()),
                ..Default::default()
            })
            .unwrap();
        if stored.items.len() >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = process_cpu(child.id());
    std::thread::sleep(IDLE);
    let cpu = process_cpu(child.id()) - before;
    let peak_kib = procfs::field_kib(&procfs::proc_status(child.id()), "VmHWM:");
    // SIGTERM, as the kubelet stops it (and a profiler wrapping it then writes its data).
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    println!(
        "  round {round} {label} idle {} s after {n} creates: CPU {cpu:.3} s, peak RSS {:.1} MiB",
        IDLE.as_secs(),
        peak_kib as f64 / 1024.0
    );
    (cpu, peak_kib)
}

/// The children's user and system CPU from the second line `times` prints
/// (`0m0.19s 0m0.04s`).
fn children_cpu(times: &str) -> (f64, f64) {
    let line = times.lines().last().unwrap_or("");
    let mut secs = line.split_whitespace().filter_map(|t| {
        let (m, s) = t.trim_end_matches('s').split_once('m')?;
        Some(m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
    });
    (secs.next().unwrap_or(0.0), secs.next().unwrap_or(0.0))
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
    fn since(&self, before: &Seen, who: &str, cpu: f64) -> String {
        format!(
            "CPU {who} {cpu:.3} s, kube-apiserver {:.2} s, etcd {:.2} s; \
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

//! Controller benchmark: the binary converging N APIServices (default flags and `--qps 0`)
//! beside the REST floor measured in the same run, its peak RSS and CPU time; and each
//! binary's footprint beside the previous release's (benches/README.md): size, an idle
//! controller's RSS and threads, peak and steady RSS with 1,000 objects. The static binary's
//! footprint has limits (idle RSS under 4 MB, 1,000 objects under 7 MB, idle threads at most
//! workers + 6): the bench fails, after printing everything, when one is passed.
//!
//! - floor: `--workers` threads POSTing the same N objects over one keep-alive client
//!   (what the controller cannot beat: same server, same number of connections);
//! - floor with a watch open: the same, beside a watch drained without decoding (what the
//!   server spends on the watch any list/watch controller needs); the controller's ratio to
//!   it is its own overhead;
//! - converge: from spawning `autoregister run` (not `--once`, so it is still alive to be
//!   measured) until the server has answered N creates and the controller's watch is open;
//! - peak RSS (VmHWM) and CPU (utime + stime) of the controller process at that moment;
//! - idle: the controller with an empty manifest directory, once its watch is open;
//! - seat-limited: N creates against a server that serves K requests at once and answers
//!   the rest 429 with `Retry-After` (as API Priority and Fairness does), with more workers
//!   than seats: convergence time and 429s per converged name, with the client-wide hold
//!   after a 429 and without it (`AUTOREGISTER_THROTTLE_WRITES=off`, each write meeting its
//!   own 429, as before the hold existed), in the same run.
//!
//! `cargo bench --features testing --bench controller -- [--rounds R] [--sizes 1000,10000] [--memory 1000] [--seats K] [--seats-n N] [--footprint]`
//! (`--footprint`: the footprint table alone, in seconds)
//! `BENCH_BINS=label=path,...` names the binaries (default: the release build);
//! `BENCH_LOG=FILE` appends the controllers' logs at debug level to FILE (to see where time goes).

#[path = "../tests/support/bench.rs"]
mod bench;
#[path = "../tests/support/procfs.rs"]
mod procfs;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use autoregister::api::{APIService, APIServiceSpec, ServiceReference};
use autoregister::client::{Api, Client};
use autoregister::testserver::TestServer;
use bench::{binaries, median};
use procfs::{clock_ticks, cpu_ticks, field_kib, proc_status};

/// The controller's default `--workers`, and so the floor's connection count.
const WORKERS: usize = 2;

fn main() {
    let mut rounds = 3usize;
    let mut sizes = vec![1000usize, 10_000];
    let mut memory_n = 1000usize;
    let mut footprint_only = false;
    let mut seats = SEATS;
    let mut seats_n = 1000usize;
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(a) = args.next() {
        let mut num = || args.next().and_then(|v| v.parse().ok());
        match a.as_str() {
            "--rounds" => rounds = num().unwrap_or(rounds),
            "--memory" => memory_n = num().unwrap_or(memory_n),
            "--footprint" => footprint_only = true,
            "--seats" => seats = num().unwrap_or(seats),
            "--seats-n" => seats_n = num().unwrap_or(seats_n),
            "--sizes" => {
                sizes = args
                    .next()
                    .map(|v| v.split(',').filter_map(|n| n.parse().ok()).collect())
                    .unwrap_or(sizes)
            }
            _ => {}
        }
    }
    let bins = binaries();
    let dir = std::env::temp_dir().join(format!("autoregister-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ticks = clock_ticks();

    if footprint_only {
        let over = footprint_table(&bins, &dir, memory_n);
        let _ = std::fs::remove_dir_all(&dir);
        if over {
            std::process::exit(1);
        }
        return;
    }
    println!("controller benchmark; median of {rounds} rounds; {WORKERS} workers (the default)");
    for (label, path) in &bins {
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        println!("  {label}: {path} ({:.2} MB)", size as f64 / 1e6);
    }
    println!(
        "  floor = {WORKERS} keep-alive threads POSTing the same objects to a fresh test server"
    );
    println!();
    println!("| N | binary | flags | converge | raw floor | ratio | ratio to the floor with a watch open | peak RSS | CPU | first request | first create |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in &sizes {
        let manifests = write_manifests(&dir, n);
        let mut floor = Vec::new();
        let mut floor_watch = Vec::new();
        let mut runs: Vec<Vec<Run>> = (0..bins.len() * FLAGS.len()).map(|_| Vec::new()).collect();
        for _ in 0..rounds {
            floor.push(floor_creates(n, false));
            floor_watch.push(floor_creates(n, true));
            for (b, (_, bin)) in bins.iter().enumerate() {
                for (f, flags) in FLAGS.iter().enumerate() {
                    runs[b * FLAGS.len() + f]
                        .push(run_until_converged(bin, &manifests, n, flags, ticks));
                }
            }
        }
        let floor = median(floor);
        let floor_watch = median(floor_watch);
        println!(
            "| {n} | floor with a watch open | | {:.3} s | {:.3} s | {:.2} | 1.00 | | | | |",
            floor_watch.as_secs_f64(),
            floor.as_secs_f64(),
            floor_watch.as_secs_f64() / floor.as_secs_f64(),
        );
        for (b, (label, _)) in bins.iter().enumerate() {
            for (f, flags) in FLAGS.iter().enumerate() {
                let r = median_run(std::mem::take(&mut runs[b * FLAGS.len() + f]));
                println!(
                    "| {n} | {label} | {} | {:.3} s | {:.3} s | {:.2} | {:.2} | {:.1} MiB | {:.2} s | {:.1} ms | {:.1} ms |",
                    if flags.is_empty() {
                        "default".to_string()
                    } else {
                        format!("`{}`", flags.join(" "))
                    },
                    r.converge.as_secs_f64(),
                    floor.as_secs_f64(),
                    r.converge.as_secs_f64() / floor.as_secs_f64(),
                    r.converge.as_secs_f64() / floor_watch.as_secs_f64(),
                    r.peak_kib as f64 / 1024.0,
                    r.cpu_secs,
                    r.phases[0].as_secs_f64() * 1000.0,
                    r.phases[1].as_secs_f64() * 1000.0,
                );
            }
        }
    }
    println!();
    seat_limited_table(&bins, &dir, seats_n, seats, rounds);
    println!();
    let over = footprint_table(&bins, &dir, memory_n);
    let _ = std::fs::remove_dir_all(&dir);
    if over {
        std::process::exit(1);
    }
}

/// The static binary's footprint limits: idle RSS and peak RSS with 1,000 objects (bytes).
const IDLE_RSS_LIMIT: u64 = 4_000_000;
const RSS_1000_LIMIT: u64 = 7_000_000;
/// Idle threads beyond the workers.
const THREADS_BEYOND_WORKERS: u64 = 6;

/// Each binary's footprint beside the previous release's; answers whether the static
/// binary passed a limit (said in the output).
fn footprint_table(bins: &[(String, String)], dir: &Path, memory_n: usize) -> bool {
    let previous = previous_footprint();
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).expect("empty manifests dir");
    let manifests = write_manifests(dir, memory_n);
    println!(
        "footprint, each beside the previous release's (benches/README.md); {WORKERS} workers"
    );
    println!();
    let n = thousands(memory_n as u64);
    println!("| binary | size | idle RSS | idle threads | peak RSS, {n} objects | steady RSS, {n} objects | per cached object |");
    println!("|---|---|---|---|---|---|---|");
    let mut over = Vec::new();
    for (label, bin) in bins {
        let size = std::fs::metadata(bin).map(|m| m.len()).unwrap_or(0);
        let (idle_kib, threads) = idle(bin, &empty);
        let (peak_kib, steady_kib) = memory(bin, &manifests, memory_n);
        let was = |column: usize| match previous.get(label).and_then(|row| row.get(column)) {
            Some(v) => format!(" (was {v})"),
            None => String::new(),
        };
        println!(
            "| {label} | {} bytes{} | {:.1} MiB{} | {threads}{} | {:.1} MiB{} | {:.1} MiB | {:.2} KiB |",
            thousands(size),
            was(0),
            idle_kib as f64 / 1024.0,
            was(1),
            was(2),
            peak_kib as f64 / 1024.0,
            // The previous figure is for 1,000 objects.
            if memory_n == 1000 { was(3) } else { String::new() },
            steady_kib as f64 / 1024.0,
            steady_kib.saturating_sub(idle_kib) as f64 / memory_n as f64,
        );
        if label == "static" {
            let threads_limit = WORKERS as u64 + THREADS_BEYOND_WORKERS;
            let mut limits = vec![("idle RSS", idle_kib * 1024, IDLE_RSS_LIMIT)];
            // The 1,000-object limit holds only for 1,000 objects (`--memory` may differ).
            if memory_n == 1000 {
                limits.push((
                    "peak RSS with 1,000 objects",
                    peak_kib * 1024,
                    RSS_1000_LIMIT,
                ));
            }
            for (what, value, limit) in limits {
                if value >= limit {
                    over.push(format!(
                        "{what} {} bytes, limit {} bytes",
                        thousands(value),
                        thousands(limit)
                    ));
                }
            }
            if threads > threads_limit {
                over.push(format!("{threads} idle threads, limit {threads_limit} (workers + {THREADS_BEYOND_WORKERS})"));
            }
        }
    }
    println!();
    println!(
        "static binary limits: idle RSS under {} bytes, peak RSS with 1,000 objects under {} bytes, idle threads at most workers + {THREADS_BEYOND_WORKERS}: {}",
        thousands(IDLE_RSS_LIMIT),
        thousands(RSS_1000_LIMIT),
        if over.is_empty() { "within".to_string() } else { format!("OVER: {}", over.join("; ")) }
    );
    !over.is_empty()
}

/// The previous release's footprint, from the table under "The previous release's footprint"
/// in benches/README.md: binary → [size, idle RSS, idle threads, peak RSS with 1,000 objects].
fn previous_footprint() -> std::collections::HashMap<String, Vec<String>> {
    let readme = include_str!("README.md");
    readme
        .split("## The previous release's footprint")
        .nth(1)
        .unwrap_or("")
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .filter_map(|row| {
            let cells: Vec<String> = row
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            let (label, rest) = cells.split_first()?;
            Some((label.clone(), rest.to_vec()))
        })
        .collect()
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The flag sets measured: the defaults, and the client-side limit explicitly off.
const FLAGS: [&[&str]; 2] = [&[], &["--qps", "0"]];

fn spec(i: usize) -> (String, APIServiceSpec) {
    let group = format!("g{i}.bench.example.com");
    let spec = APIServiceSpec {
        service: Some(ServiceReference {
            namespace: "bench".into(),
            name: "api".into(),
            port: Some(443),
            ..Default::default()
        }),
        group: group.as_str().into(),
        version: "v1".into(),
        insecure_skip_tls_verify: true,
        group_priority_minimum: 100,
        version_priority: 10,
        ..Default::default()
    };
    (format!("v1.{group}"), spec)
}

fn write_manifests(dir: &Path, n: usize) -> PathBuf {
    let sub = dir.join(format!("n{n}"));
    std::fs::create_dir_all(&sub).expect("manifest dir");
    let path = sub.join("apiservices.yaml");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("manifest file"));
    for i in 0..n {
        let (name, _) = spec(i);
        writeln!(
            f,
            "---\napiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {name}\n\
             spec:\n  group: g{i}.bench.example.com\n  version: v1\n  groupPriorityMinimum: 100\n  \
             versionPriority: 10\n  insecureSkipTLSVerify: true\n  service: {{namespace: bench, name: api, port: 443}}"
        )
        .expect("write manifest");
    }
    sub
}

/// N creates from WORKERS keep-alive threads over one client: the floor. With `watch`, a
/// watch is open meanwhile, read and discarded (what the server spends on the watch that
/// any controller needs, apart from the controller's own work).
fn floor_creates(n: usize, watch: bool) -> Duration {
    let server = TestServer::start();
    let _watch = watch.then(|| raw_watch(&server));
    let api: Api<APIService> = Api::all(Client::new(server.client_config()).expect("client"));
    let objects: Vec<APIService> = (0..n)
        .map(|i| {
            let (name, spec) = spec(i);
            APIService::new(name, spec)
        })
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for w in 0..WORKERS {
            let api = api.clone();
            let objects = &objects;
            s.spawn(move || {
                for obj in objects.iter().skip(w).step_by(WORKERS) {
                    api.create(obj).expect("create");
                }
            });
        }
    });
    start.elapsed()
}

/// A watch on APIServices over a plain socket, drained by a thread that decodes nothing.
fn raw_watch(server: &TestServer) -> std::thread::JoinHandle<()> {
    use std::io::Read as _;
    let addr = server.url().trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).expect("connect for the watch");
    write!(
        conn,
        "GET /apis/apiregistration.k8s.io/v1/apiservices?watch=true HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .expect("send the watch request");
    let mut first = [0u8; 12];
    conn.read_exact(&mut first).expect("the watch answers");
    assert!(first.starts_with(b"HTTP/1.1 200"), "watch refused");
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
    })
}

struct Run {
    converge: Duration,
    peak_kib: u64,
    cpu_secs: f64,
    /// From spawn to the first request, and to the first create.
    phases: [Duration; 2],
}

fn spawn(bin: &str, manifests: &Path, server: &TestServer, flags: &[&str]) -> Child {
    spawn_env(bin, manifests, server, flags, &[])
}

fn spawn_env(
    bin: &str,
    manifests: &Path,
    server: &TestServer,
    flags: &[&str],
    env: &[(&str, &str)],
) -> Child {
    let log = std::env::var_os("BENCH_LOG").map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("BENCH_LOG file")
    });
    let mut cmd = Command::new(bin);
    // No Events: convergence is judged by counting creates of any kind, and Events are
    // paced best-effort writes beside the controller's, not part of converging.
    cmd.arg("run")
        .arg("--events=false")
        .args(flags)
        .arg("--manifests")
        .arg(manifests)
        .args(["--server", server.url()]);
    // Default flags include the default log level (info: one line per write).
    match log {
        Some(_) => cmd.env("RUST_LOG", "debug"),
        None => cmd.env_remove("RUST_LOG"),
    };
    cmd.envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(log.map_or_else(Stdio::null, Stdio::from))
        .spawn()
        .expect("spawn the controller")
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "controller exited {exit}");
}

fn run_until_converged(bin: &str, manifests: &Path, n: usize, flags: &[&str], ticks: f64) -> Run {
    let server = TestServer::start();
    let start = Instant::now();
    let wall = SystemTime::now();
    let child = spawn(bin, manifests, &server, flags);
    while server.count("create") < n || server.count("watch") == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "did not converge"
        );
        std::thread::sleep(Duration::from_micros(500));
    }
    let converge = start.elapsed();
    let status = proc_status(child.id());
    let cpu_secs = cpu_ticks(child.id()) as f64 / ticks;
    stop(child);
    // Where the time went, from the server's request log: start-up until the first request
    // (exec, manifests, client), until the first create (list, watch, workers), the creates.
    let requests = server.requests();
    let at = |verb: Option<&str>| {
        requests
            .iter()
            .find(|r| verb.is_none_or(|v| r.verb == v))
            .and_then(|r| r.time.duration_since(wall).ok())
            .unwrap_or_default()
    };
    let phases = [at(None), at(Some("create"))];
    assert_eq!(
        server.list_objects("apiservices", None).len(),
        n,
        "did not converge"
    );
    Run {
        converge,
        peak_kib: field_kib(&status, "VmHWM:"),
        cpu_secs,
        phases,
    }
}

/// Seats of the seat-limited run: the 3-seat priority level.
const SEATS: usize = 3;
/// Workers of the seat-limited run: more than the seats, so writes contend for them.
const SEAT_WORKERS: usize = 8;
/// Time each request holds its seat: a real server's write takes milliseconds (etcd).
const SEAT_LATENCY: Duration = Duration::from_millis(5);

/// The seat-limited table: each binary with the client-wide 429 hold (the default) and
/// without it, the same round by round.
fn seat_limited_table(
    bins: &[(String, String)],
    dir: &Path,
    n: usize,
    seats: usize,
    rounds: usize,
) {
    let manifests = write_manifests(dir, n);
    println!(
        "seat-limited server: {seats} seats (API Priority and Fairness), {} ms per request, \
         `--workers {SEAT_WORKERS}`; median of {rounds} rounds",
        SEAT_LATENCY.as_millis()
    );
    println!();
    println!("| N | binary | writes after a 429 | converge | 429s | 429s per converged name |");
    println!("|---|---|---|---|---|---|");
    for (label, bin) in bins {
        for (hold, env) in [
            ("held (default)", &[][..]),
            (
                "each meets its own 429",
                &[("AUTOREGISTER_THROTTLE_WRITES", "off")][..],
            ),
        ] {
            let mut runs: Vec<(Duration, usize)> = (0..rounds)
                .map(|_| seat_limited_run(bin, &manifests, n, seats, env))
                .collect();
            runs.sort();
            let (converge, rejected) = runs[runs.len() / 2];
            println!(
                "| {n} | {label} | {hold} | {:.2} s | {rejected} | {:.2} |",
                converge.as_secs_f64(),
                rejected as f64 / n as f64
            );
        }
    }
}

/// One seat-limited convergence: its time and the 429s the server sent.
fn seat_limited_run(
    bin: &str,
    manifests: &Path,
    n: usize,
    seats: usize,
    env: &[(&str, &str)],
) -> (Duration, usize) {
    let server = TestServer::builder()
        .seat_limit(seats)
        .start()
        .expect("test server");
    server.faults().set_latency(SEAT_LATENCY);
    let workers = SEAT_WORKERS.to_string();
    let start = Instant::now();
    let child = spawn_env(bin, manifests, &server, &["--workers", &workers], env);
    while server.list_objects("apiservices", None).len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "did not converge"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let converge = start.elapsed();
    let rejected = server.seat_rejections();
    stop(child);
    (converge, rejected)
}

/// RSS (kB) and thread count of a controller with nothing to do, once its watch is open.
fn idle(bin: &str, empty: &Path) -> (u64, u64) {
    let server = TestServer::start();
    let child = spawn(bin, empty, &server, &[]);
    let start = Instant::now();
    while server.count("watch") == 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "no watch");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Let the first bookmark round trip settle the steady state.
    std::thread::sleep(Duration::from_millis(1500));
    let status = proc_status(child.id());
    stop(child);
    (field_kib(&status, "VmRSS:"), field_kib(&status, "Threads:"))
}

/// Peak RSS when N objects have converged, and RSS once the controller has settled (every
/// watch event synced, nothing left to do): kB.
fn memory(bin: &str, manifests: &Path, n: usize) -> (u64, u64) {
    let server = TestServer::start();
    let child = spawn(bin, manifests, &server, &[]);
    let start = Instant::now();
    while server.count("create") < n || server.count("watch") == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "did not converge"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let peak = field_kib(&proc_status(child.id()), "VmHWM:");
    // The watch events of our own creates are still being synced for a moment.
    std::thread::sleep(Duration::from_secs(2));
    let steady = field_kib(&proc_status(child.id()), "VmRSS:");
    stop(child);
    (peak, steady)
}

/// The run with the median converge time (its RSS and CPU go with it), peak RSS as the max.
fn median_run(mut v: Vec<Run>) -> Run {
    let peak = v.iter().map(|r| r.peak_kib).max().unwrap_or(0);
    v.sort_by_key(|r| r.converge);
    let mut r = v.swap_remove(v.len() / 2);
    r.peak_kib = peak;
    r
}

//! Controller benchmark, one table: the binary converging N APIServices (default flags and
//! `--qps 0`) beside the REST floor measured in the same run, its peak RSS and CPU time; the
//! static binary's size; an idle controller's RSS and threads.
//!
//! - floor: `--workers` threads POSTing the same N objects over one keep-alive client
//!   (what the controller cannot beat: same server, same number of connections);
//! - converge: from spawning `autoregister run` (not `--once`, so it is still alive to be
//!   measured) until the server has answered N creates and the controller's watch is open;
//! - peak RSS (VmHWM) and CPU (utime + stime) of the controller process at that moment;
//! - idle: the controller with an empty manifest directory, once its watch is open.
//!
//! `cargo bench --features testing --bench controller -- [--rounds R] [--sizes 1000,10000]`
//! `BENCH_LOG=FILE` appends the controllers' logs at debug level to FILE (to see where time goes).
//! The binary is `AUTOREGISTER_BIN` if set (`make bench` passes the static one), else the
//! release build cargo made for this bench. `STATIC_BIN` names the binary whose size is shown.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use autoregister::api::{APIService, APIServiceSpec, ServiceReference};
use autoregister::client::{Api, Client};
use autoregister::testserver::TestServer;

/// The controller's default `--workers`, and so the floor's connection count.
const WORKERS: usize = 2;

fn main() {
    let mut rounds = 3usize;
    let mut sizes = vec![1000usize, 10_000];
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()).unwrap_or(rounds),
            "--sizes" => {
                sizes = args
                    .next()
                    .map(|v| v.split(',').filter_map(|n| n.parse().ok()).collect())
                    .unwrap_or(sizes)
            }
            _ => {}
        }
    }
    let bin = std::env::var("AUTOREGISTER_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_autoregister").to_string());
    let dir = std::env::temp_dir().join(format!("autoregister-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ticks = clock_ticks();

    println!("controller benchmark: {bin}");
    println!("{WORKERS} workers (default), median of {rounds} rounds; floor = {WORKERS} keep-alive threads POSTing the same objects");
    println!();
    println!(
        "| N | flags | converge | raw floor | ratio | peak RSS | CPU |\n|---|---|---|---|---|---|---|"
    );
    for &n in &sizes {
        let manifests = write_manifests(&dir, n);
        let mut floor = Vec::new();
        let mut runs: [Vec<Run>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..rounds {
            floor.push(floor_creates(n));
            for (i, flags) in FLAGS.iter().enumerate() {
                runs[i].push(run_until_converged(&bin, &manifests, n, flags, ticks));
            }
        }
        let floor = median(floor);
        for (i, flags) in FLAGS.iter().enumerate() {
            let r = median_run(std::mem::take(&mut runs[i]));
            println!(
                "| {n} | {} | {:.3} s | {:.3} s | {:.2} | {:.1} MiB | {:.2} s |",
                if flags.is_empty() {
                    "default".to_string()
                } else {
                    format!("`{}`", flags.join(" "))
                },
                r.converge.as_secs_f64(),
                floor.as_secs_f64(),
                r.converge.as_secs_f64() / floor.as_secs_f64(),
                r.peak_kib as f64 / 1024.0,
                r.cpu_secs,
            );
        }
    }
    println!();
    match std::env::var("STATIC_BIN") {
        Ok(path) => match std::fs::metadata(&path) {
            Ok(m) => println!(
                "static binary: {} bytes ({:.2} MB), {path}",
                m.len(),
                m.len() as f64 / 1e6
            ),
            Err(e) => println!("static binary: {path}: {e}"),
        },
        Err(_) => println!("static binary: not built (STATIC_BIN unset; `make bench` sets it)"),
    }
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).expect("empty manifests dir");
    let (rss, threads) = idle(&bin, &empty);
    println!(
        "idle (no manifests, watch open, default flags): RSS {:.1} MiB, {threads} threads",
        rss as f64 / 1024.0
    );
    let _ = std::fs::remove_dir_all(&dir);
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
        group: group.clone(),
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

/// N creates from WORKERS keep-alive threads over one client: the floor.
fn floor_creates(n: usize) -> Duration {
    let server = TestServer::start();
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

struct Run {
    converge: Duration,
    peak_kib: u64,
    cpu_secs: f64,
}

fn spawn(bin: &str, manifests: &Path, server: &TestServer, flags: &[&str]) -> Child {
    let log = std::env::var_os("BENCH_LOG").map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("BENCH_LOG file")
    });
    let mut cmd = Command::new(bin);
    cmd.arg("run")
        .args(flags)
        .arg("--manifests")
        .arg(manifests)
        .args(["--server", server.url()]);
    // Default flags include the default log level (info: one line per write).
    match log {
        Some(_) => cmd.env("RUST_LOG", "debug"),
        None => cmd.env_remove("RUST_LOG"),
    };
    cmd.stdout(Stdio::null())
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
    assert_eq!(
        server.list_objects("apiservices", None).len(),
        n,
        "did not converge"
    );
    Run {
        converge,
        peak_kib: field_kib(&status, "VmHWM:"),
        cpu_secs,
    }
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

fn proc_status(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status")
}

/// The number after `field` in /proc/PID/status (kB for memory fields).
fn field_kib(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// utime + stime of `pid` in clock ticks (fields 14 and 15 of /proc/PID/stat).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    // The command name (field 2) may hold spaces; count from after its closing parenthesis.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

/// Clock ticks per second for /proc's CPU times (`getconf CLK_TCK`, 100 on Linux).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The run with the median converge time (its RSS and CPU go with it), peak RSS as the max.
fn median_run(mut v: Vec<Run>) -> Run {
    let peak = v.iter().map(|r| r.peak_kib).max().unwrap_or(0);
    v.sort_by_key(|r| r.converge);
    let mut r = v.swap_remove(v.len() / 2);
    r.peak_kib = peak;
    r
}

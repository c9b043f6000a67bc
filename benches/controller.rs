//! Controller benchmark: `autoregister run --once` registering N APIServices, beside baselines
//! measured in the same run.
//!
//! - time: the binary converging N objects vs. the same N creates sent by a plain loop of
//!   client calls (the REST floor: same client, same server, same parallelism, no controller);
//! - memory: the binary's peak RSS while converging vs. the same run with no manifests.
//!
//! `cargo bench --features testing --bench controller -- [N] [rounds]`

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use autoregister::api::{APIService, APIServiceSpec, ServiceReference};
use autoregister::client::{Api, Client};
use autoregister::testserver::TestServer;

const WORKERS: usize = 2;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let bin = env!("CARGO_BIN_EXE_autoregister");
    let dir = std::env::temp_dir().join(format!("autoregister-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let manifests = write_manifests(&dir, n);
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).expect("empty manifests dir");

    let mut floor = Vec::new();
    let mut controller = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..rounds {
        floor.push(baseline_creates(n));
        let (t, kib) = run_once(bin, &manifests, n);
        controller.push(t);
        rss.push(kib);
    }
    let idle_rss = run_once(bin, &empty, 0).1;
    let _ = std::fs::remove_dir_all(&dir);

    let floor = median(floor);
    let ctl = median(controller);
    let rss = rss.into_iter().max().unwrap_or(0);
    println!("controller: {n} APIServices, {WORKERS} workers, median of {rounds} rounds");
    println!(
        "  converge time   {:>8.1} ms   baseline (plain create loop) {:>8.1} ms   ratio {:.2}",
        ms(ctl),
        ms(floor),
        ctl.as_secs_f64() / floor.as_secs_f64()
    );
    println!(
        "  peak RSS        {:>8} KiB  baseline (no manifests)        {:>8} KiB  ratio {:.2}",
        rss,
        idle_rss,
        rss as f64 / idle_rss.max(1) as f64
    );
}

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

fn write_manifests(dir: &std::path::Path, n: usize) -> PathBuf {
    let path = dir.join("apiservices.yaml");
    let mut f = std::fs::File::create(&path).expect("manifest file");
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
    path
}

/// N creates from WORKERS threads over one client: what the controller cannot beat.
fn baseline_creates(n: usize) -> Duration {
    let server = TestServer::start();
    let api: Api<APIService> = Api::all(Client::new(server.client_config()).expect("client"));
    let start = Instant::now();
    std::thread::scope(|s| {
        for w in 0..WORKERS {
            let api = api.clone();
            s.spawn(move || {
                for i in (w..n).step_by(WORKERS) {
                    let (name, spec) = spec(i);
                    api.create(&APIService::new(name, spec)).expect("create");
                }
            });
        }
    });
    start.elapsed()
}

/// The binary (`run`, not `--once`, so it is still alive to be measured) until N creates
/// have landed and its watch is open; returns that time and its peak RSS (KiB) at that point.
fn run_once(bin: &str, manifests: &std::path::Path, n: usize) -> (Duration, u64) {
    let server = TestServer::start();
    let start = Instant::now();
    let mut child = Command::new(bin)
        // No Events: the loop below counts creates of any kind, and Events are paced
        // best-effort writes beside the controller's, not part of converging.
        .args(["run", "--events=false", "--qps", "0", "--workers"])
        .arg(WORKERS.to_string())
        .arg("--manifests")
        .arg(manifests)
        .args(["--server", server.url()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    while server.count("create") < n || server.count("watch") == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "did not converge"
        );
        std::thread::sleep(Duration::from_micros(500));
    }
    let elapsed = start.elapsed();
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("proc status");
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "{exit}");
    assert_eq!(
        server.list_objects("apiservices", None).len(),
        n,
        "did not converge"
    );
    (elapsed, kib)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

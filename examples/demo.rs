//! `make demo`: the real `autoregister run` against the built-in test API server, no cluster needed.
//!
//! Starts the test server on loopback playing kube-apiserver (its built-in APIServices and
//! its own autoregister rules for the kube-aggregator label), writes a kubeconfig, runs the
//! binary on a copy of `examples/apiservices/`, and shows the controller at work beside
//! kube-apiserver's objects, which it never touches: creation, an intruder's edit stomped
//! back, a file removed from the manifests and its APIServices deleted, a clean stop.
//!
//! `cargo run --features testing --example demo -- [path/to/autoregister]`

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use autoregister::api::{APIService, AUTO_MANAGED_LABEL, DEFAULT_LABEL_KEY};
use autoregister::client::{Api, Client};
use autoregister::testserver::TestServer;
use autoregister::text;
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() {
    if let Err(e) = demo() {
        eprintln!("demo failed: {e}");
        std::process::exit(1);
    }
}

fn demo() -> Result<()> {
    let binary = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/debug/autoregister"));
    let work = std::env::temp_dir().join(format!("autoregister-demo-{}", std::process::id()));
    let manifests = work.join("manifests");
    std::fs::create_dir_all(&manifests)?;
    for entry in std::fs::read_dir("examples/apiservices")? {
        let path = entry?.path();
        if let Some(name) = path.file_name() {
            std::fs::copy(&path, manifests.join(name))?;
        }
    }

    let server = TestServer::builder()
        .kube_apiserver(true)
        .kube_apiserver_crd_group("stable.example.com", "v1")
        .start()?;
    let kubeconfig = work.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    step(&format!(
        "test API server at {}, playing kube-apiserver",
        server.url()
    ));
    let builtins = kube_apiservers_objects(&server);

    // Already in the "cluster", beside kube-apiserver's own: an APIService nobody labelled
    // (never touched), and one of ours no manifest wants any more (deleted, as upstream's 6A).
    server.seed(
        "apiservices",
        None,
        apiservice("v1.legacy.example.com", "legacy.example.com", None),
    );
    server.seed(
        "apiservices",
        None,
        apiservice("v1.stale.example.com", "stale.example.com", Some("true")),
    );
    show(&server, "before start");

    step(&format!(
        "autoregister run --manifests {}",
        manifests.display()
    ));
    let child = Command::new(&binary)
        .args(["run", "--manifests"])
        .arg(&manifests)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot run {}: {e} (build it first: cargo build)",
                binary.display()
            )
        })?;
    // Killed on drop: a failed step must not leave the controller running.
    let mut child = KillOnDrop(child);
    let log = Log::relay(&mut child.0);

    let desired = [
        "v1.example.com",
        "v1alpha1.wardle.example.com",
        "v1beta1.custom.metrics.k8s.io",
        "v1beta1.external.metrics.k8s.io",
        "v1beta1.metrics.k8s.io",
        "v1beta1.wardle.example.com",
        "v1beta2.custom.metrics.k8s.io",
    ];
    wait(
        &log,
        "every manifest object registered, the stale one deleted",
        &["v1.stale.example.com 6A delete"],
        || desired.iter().all(|n| exists(&server, n)) && !exists(&server, "v1.stale.example.com"),
    )?;
    show(&server, "after the first sync");

    step("an intruder sets v1beta1.metrics.k8s.io versionPriority to 999");
    let api: Api<APIService> = Api::all(Client::new(server.client_config())?);
    let mut obj = api.get("v1beta1.metrics.k8s.io")?;
    obj.spec.version_priority = 999;
    api.update(&obj)?;
    wait(
        &log,
        "the controller restores versionPriority 100",
        &["v1beta1.metrics.k8s.io 6C update"],
        || priority(&server, "v1beta1.metrics.k8s.io") == Some(100),
    )?;

    step("wardle.json removed from the manifests");
    std::fs::remove_file(manifests.join("wardle.json"))?;
    wait(
        &log,
        "both wardle APIServices deregistered",
        &[
            "v1alpha1.wardle.example.com 6A delete",
            "v1beta1.wardle.example.com 6A delete",
        ],
        || {
            !exists(&server, "v1alpha1.wardle.example.com")
                && !exists(&server, "v1beta1.wardle.example.com")
        },
    )?;
    show(&server, "after the edits");
    if kube_apiservers_objects(&server) != builtins {
        return Err("kube-apiserver's APIServices changed".into());
    }
    step(&format!(
        "ok: kube-apiserver's {} untouched (same UIDs and resourceVersions)",
        text::count(builtins.len(), "APIService")
    ));

    step("SIGTERM");
    let pid = child.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status()?;
    let started = Instant::now();
    let status = child.0.wait()?;
    let took = started.elapsed();
    log.wait_closed(Duration::from_secs(5));
    log.flush();
    let _ = std::fs::remove_dir_all(&work);
    let stopped = match status.code() {
        Some(0) => format!("stopped cleanly on SIGTERM within {}", text::duration(took)),
        Some(code) => return Err(format!("autoregister exited with code {code} on SIGTERM").into()),
        None => return Err("autoregister was killed by a signal".into()),
    };
    step("summary");
    for line in [
        format!(
            "registered {} from the manifests; deleted v1.stale.example.com, ours but no longer wanted",
            text::count(desired.len(), "APIService")
        ),
        "restored v1beta1.metrics.k8s.io after an intruder's edit".to_string(),
        "deregistered the 2 wardle APIServices when wardle.json was removed".to_string(),
        format!(
            "never touched v1.legacy.example.com (no ownership label) nor kube-apiserver's {}",
            text::count(builtins.len(), "APIService")
        ),
        stopped,
    ] {
        println!("  - {line}");
    }
    Ok(())
}

fn apiservice(name: &str, group: &str, managed: Option<&str>) -> serde_json::Value {
    let mut obj = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name},
        "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
                 "service": {"namespace": "default", "name": "api", "port": 443},
                 "insecureSkipTLSVerify": true}
    });
    if let Some(m) = managed {
        obj["metadata"]["labels"] = json!({ DEFAULT_LABEL_KEY: m });
    }
    obj
}

fn exists(server: &TestServer, name: &str) -> bool {
    server.get_object("apiservices", None, name).is_some()
}

fn priority(server: &TestServer, name: &str) -> Option<i64> {
    server.get_object("apiservices", None, name)?["spec"]["versionPriority"].as_i64()
}

fn step(heading: &str) {
    println!("\n==> {heading}");
}

/// kube-apiserver's APIServices (those with its label) as (name, uid, resourceVersion).
fn kube_apiservers_objects(server: &TestServer) -> Vec<(String, String, String)> {
    server
        .list_objects("apiservices", None)
        .iter()
        .filter(|o| o["metadata"]["labels"][AUTO_MANAGED_LABEL].is_string())
        .map(|o| {
            let m = &o["metadata"];
            let field = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (field("name"), field("uid"), field("resourceVersion"))
        })
        .collect()
}

/// Prints the APIServices that matter to the story as a small table (ours, and any
/// without an owner), and kube-apiserver's own as one line.
fn show(server: &TestServer, when: &str) {
    println!("\nAPIServices {when}:");
    println!("  {:36} {:26} {:>8}", "NAME", "OWNER", "PRIORITY");
    let mut kube_apiservers = 0;
    for obj in server.list_objects("apiservices", None) {
        let name = obj["metadata"]["name"].as_str().unwrap_or("?");
        let labels = &obj["metadata"]["labels"];
        let owner = match (
            labels[DEFAULT_LABEL_KEY].as_str(),
            labels[AUTO_MANAGED_LABEL].as_str(),
        ) {
            (Some(v), _) => format!("autoregister ({v})"),
            (None, Some(_)) => {
                kube_apiservers += 1;
                continue;
            }
            (None, None) => "- (no ownership label)".to_string(),
        };
        let prio = obj["spec"]["versionPriority"].as_i64().unwrap_or(0);
        println!("  {name:36} {owner:26} {prio:>8}");
    }
    println!(
        "  (and kube-apiserver's own {}: v1., v1.apps, ..., not shown)",
        text::count(kube_apiservers, "APIService")
    );
}

/// A child process killed (if still running) and reaped when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The controller's log, collected by a thread and printed (indented) only by the main
/// thread, so each line lands under the step it belongs to.
#[derive(Clone, Default)]
struct Log {
    inner: Arc<Mutex<LogLines>>,
}

#[derive(Default)]
struct LogLines {
    lines: Vec<String>,
    printed: usize,
    closed: bool,
}

impl Log {
    /// Starts collecting `child`'s stderr.
    fn relay(child: &mut Child) -> Log {
        let log = Log::default();
        if let Some(stderr) = child.stderr.take() {
            let l = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                    l.lock().lines.push(line);
                }
                l.lock().closed = true;
            });
        }
        log
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogLines> {
        // A panic in the relay thread cannot leave the lines half-written: keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether every needle appears in a line not printed yet.
    fn has_unprinted(&self, needles: &[&str]) -> bool {
        let l = self.lock();
        let fresh = &l.lines[l.printed..];
        needles
            .iter()
            .all(|n| fresh.iter().any(|line| line.contains(n)))
    }

    /// Prints the lines collected since the last flush.
    fn flush(&self) {
        let mut l = self.lock();
        for line in &l.lines[l.printed..] {
            println!("    | {line}");
        }
        l.printed = l.lines.len();
    }

    /// Waits (at most `limit`) until the process's stderr has ended.
    fn wait_closed(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.lock().closed && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Polls until `done` holds and the controller has logged each of `lines` (so its lines
/// print under this step, not the next), for at most 20 s; then prints them and the result.
fn wait(log: &Log, what: &str, lines: &[&str], mut done: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(done() && log.has_unprinted(lines)) {
        if Instant::now() > deadline {
            log.flush();
            return Err(format!("timed out waiting: {what}").into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    log.flush();
    step(&format!("ok: {what}"));
    Ok(())
}

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
use std::time::{Duration, Instant};

use autoregister::api::{APIService, AUTO_MANAGED_LABEL, DEFAULT_LABEL_KEY};
use autoregister::client::{Api, Client};
use autoregister::testserver::TestServer;
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
    relay(&mut child.0);

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
        "every manifest object registered, the stale one deleted",
        || desired.iter().all(|n| exists(&server, n)) && !exists(&server, "v1.stale.example.com"),
    )?;
    show(&server, "after the first sync");

    step("an intruder sets v1beta1.metrics.k8s.io versionPriority to 999");
    let api: Api<APIService> = Api::all(Client::new(server.client_config())?);
    let mut obj = api.get("v1beta1.metrics.k8s.io")?;
    obj.spec.version_priority = 999;
    api.update(&obj)?;
    wait("the controller restores versionPriority 100", || {
        priority(&server, "v1beta1.metrics.k8s.io") == Some(100)
    })?;

    step("wardle.json removed from the manifests");
    std::fs::remove_file(manifests.join("wardle.json"))?;
    wait("both wardle APIServices deregistered", || {
        !exists(&server, "v1alpha1.wardle.example.com")
            && !exists(&server, "v1beta1.wardle.example.com")
    })?;
    show(&server, "after the edits");
    if kube_apiservers_objects(&server) != builtins {
        return Err("kube-apiserver's APIServices changed".into());
    }
    step(&format!(
        "ok: kube-apiserver's {} APIServices untouched (same UIDs and resourceVersions)",
        builtins.len()
    ));

    step("SIGTERM");
    let pid = child.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status()?;
    let started = Instant::now();
    let status = child.0.wait()?;
    step(&format!(
        "autoregister exited with {status} after {:?}",
        started.elapsed()
    ));
    let _ = std::fs::remove_dir_all(&work);
    if !status.success() {
        return Err("autoregister did not exit cleanly".into());
    }
    step("demo complete");
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

fn step(text: &str) {
    println!("\n==> {text}");
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

/// Prints the server's APIServices as a small table, with who owns each.
fn show(server: &TestServer, when: &str) {
    println!("\nAPIServices {when}:");
    println!("  {:36} {:26} {:>8}", "NAME", "OWNER", "PRIORITY");
    for obj in server.list_objects("apiservices", None) {
        let name = obj["metadata"]["name"].as_str().unwrap_or("?");
        let labels = &obj["metadata"]["labels"];
        let owner = match (
            labels[DEFAULT_LABEL_KEY].as_str(),
            labels[AUTO_MANAGED_LABEL].as_str(),
        ) {
            (Some(v), _) => format!("autoregister ({v})"),
            (None, Some(v)) => format!("kube-apiserver ({v})"),
            (None, None) => "-".to_string(),
        };
        let prio = obj["spec"]["versionPriority"].as_i64().unwrap_or(0);
        println!("  {name:36} {owner:26} {prio:>8}");
    }
}

/// A child process killed (if still running) and reaped when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Copies the controller's log lines to our stdout, indented, as they come.
fn relay(child: &mut Child) {
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                println!("    | {line}");
            }
        });
    }
}

/// Polls `done` until it holds, for at most 20 s.
fn wait(what: &str, mut done: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting: {what}").into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    step(&format!("ok: {what}"));
    Ok(())
}

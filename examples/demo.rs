//! `make demo`: registered means served, on the built-in test API server, no cluster needed.
//!
//! The test server plays kube-apiserver, including kube-aggregator's availability check,
//! which dials a backend over TLS and verifies its certificate against the APIService's
//! `caBundle`. The story: the example aggregated server (`examples/apiserver.rs`) serves
//! TLS behind a Service; a manifest asks for its APIService with the CA taken from a
//! Secret; `autoregister plan` shows the difference, `autoregister run` registers it and the
//! discovery check passes; the server stops and the API is withdrawn; it returns and is
//! registered and served again.
//!
//! `cargo run --features testing --example demo -- [path/to/autoregister [path/to/apiserver]]`

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use autoregister::api::AUTO_MANAGED_LABEL;
use autoregister::testserver::TestServer;
use autoregister::text;
use serde_json::{json, Value};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const NAME: &str = "v1alpha1.widgets.example.com";
const NS: &str = "widgets";
const SERVICE: &str = "widgets-apiserver";
const SECRET: &str = "widgets-apiserver-tls";
/// How long an unavailable APIService stays registered before it is withdrawn.
const WITHDRAW_AFTER: &str = "2s";

fn main() {
    if let Err(e) = demo() {
        eprintln!("demo failed: {e}");
        std::process::exit(1);
    }
}

fn demo() -> Result<()> {
    let mut args = std::env::args().skip(1).map(PathBuf::from);
    let binary = args
        .next()
        .unwrap_or_else(|| PathBuf::from("target/debug/autoregister"));
    let example = args
        .next()
        .unwrap_or_else(|| PathBuf::from("target/debug/examples/apiserver"));
    let work = std::env::temp_dir().join(format!("autoregister-demo-{}", std::process::id()));
    std::fs::create_dir_all(work.join("manifests"))?;
    let result = story(&binary, &example, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn story(binary: &Path, example: &Path, work: &Path) -> Result<()> {
    heading("Setup");
    let server = TestServer::builder().kube_apiserver(true).start()?;
    let kubeconfig = work.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    let builtins = kube_apiservers_objects(&server);
    line(&format!(
        "test API server at {}, playing kube-apiserver ({} of its own)",
        server.url(),
        text::count(builtins.len(), "APIService")
    ));

    // The Service in front of the example server: its ClusterIP is on loopback, and the
    // port is one the example can bind there.
    let svc = create(
        "services",
        json!({"metadata": {"name": SERVICE},
        "spec": {"ports": [{"name": "https", "port": 1}]}}),
        &server,
    )?;
    let ip = svc["spec"]["clusterIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let port = TcpListener::bind((ip.as_str(), 0))?.local_addr()?.port();
    server
        .update_object_as("demo", "services", Some(NS), SERVICE, |s| {
            s["spec"]["ports"] = json!([{"name": "https", "port": port}]);
        })
        .map_err(|e| e.message.clone().unwrap_or_default())?;
    create(
        "endpointslices",
        json!({
            "metadata": {"name": format!("{SERVICE}-1"), "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "FQDN",
            "endpoints": [{"addresses": ["widgets.localhost"], "conditions": {"ready": false}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        }),
        &server,
    )?;
    line(&format!(
        "Service {NS}/{SERVICE}: ClusterIP {ip}, port {port}"
    ));

    // Its certificate, as cert-manager would issue it: a Secret with ca.crt, tls.crt, tls.key.
    let host = format!("{SERVICE}.{NS}.svc");
    let (ca, cert, key) = issue(&host)?;
    std::fs::write(work.join("tls.crt"), &cert)?;
    std::fs::write(work.join("tls.key"), &key)?;
    create(
        "secrets",
        json!({
            "metadata": {"name": SECRET}, "type": "kubernetes.io/tls",
            "stringData": {"ca.crt": ca, "tls.crt": cert, "tls.key": key},
        }),
        &server,
    )?;
    line(&format!(
        "Secret {NS}/{SECRET}: a certificate for {host} and its CA (ca.crt)"
    ));

    let mut backend = Backend::start(example, work, &ip, port)?;
    set_ready(&server, true)?;
    line(&format!(
        "example server (examples/apiserver.rs) serving TLS on {ip}:{port}; endpoint ready"
    ));
    std::fs::write(work.join("manifests/widgets.yaml"), manifest(port))?;
    line(&format!(
        "manifest: {NAME}, caBundle from Secret {NS}/{SECRET} (annotation autoregister.dev/inject-ca-from-secret)"
    ));

    heading("Plan: autoregister plan");
    let out = Command::new(binary)
        .arg("plan")
        .args(["--manifests".as_ref(), work.join("manifests").as_os_str()])
        .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
        .output()
        .map_err(|e| {
            format!(
                "cannot run {}: {e} (build it first: cargo build)",
                binary.display()
            )
        })?;
    let plan = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "plan failed: {plan}{}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    for l in plan.lines().filter(|l| !l.trim().is_empty()) {
        line(l);
    }

    heading(&format!(
        "Register: autoregister run --withdraw-unavailable {WITHDRAW_AFTER}"
    ));
    let mut run = KillOnDrop(
        Command::new(binary)
            .arg("run")
            .args(["--manifests".as_ref(), work.join("manifests").as_os_str()])
            .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
            .args(["--withdraw-unavailable", WITHDRAW_AFTER])
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()?,
    );
    let log = Log::relay(&mut run.0);
    let create_line = format!("{NAME} 2C create");
    wait(&log, "the APIService created", || {
        exists(&server) && log.has(&create_line)
    })?;
    let created = Instant::now();
    line(&format!("created: {}", log.find(&create_line)));
    wait(&log, "caBundle from the Secret", || {
        ca_bundle(&server).as_deref() == Some(ca.as_bytes())
    })?;
    line(&format!("caBundle = ca.crt of Secret {NS}/{SECRET}"));
    wait(&log, "the discovery check passing", || {
        available(&server) == ("True".into(), "Passed".into())
    })?;
    line(&format!(
        "discovery check passed: GET /apis/widgets.example.com/v1alpha1 over TLS, {host} verified against caBundle"
    ));
    line(&format!(
        "Available=True (Passed), {} after the create",
        text::duration(created.elapsed())
    ));

    heading("The backend stops");
    set_ready(&server, false)?;
    backend.stop()?;
    line("example server stopped (SIGTERM); its endpoint no longer ready");
    let stopped = Instant::now();
    wait(&log, "unavailable", || available(&server).0 == "False")?;
    line(&format!("Available=False ({})", available(&server).1));
    wait(&log, "the withdrawal", || !exists(&server))?;
    line(&format!(
        "withdrawn {} after the stop: {NAME} deleted, so discovery stays whole",
        text::duration(stopped.elapsed())
    ));

    heading("It returns");
    let mut backend = Backend::start(example, work, &ip, port)?;
    set_ready(&server, true)?;
    line("example server serving again; endpoint ready");
    let back = Instant::now();
    let restored = format!("{NAME} restored");
    wait(&log, "registered again", || {
        exists(&server) && log.has(&restored)
    })?;
    line(&format!("registered again: {}", log.find(&restored)));
    wait(&log, "available again", || {
        available(&server) == ("True".into(), "Passed".into())
    })?;
    let returned = back.elapsed();
    line(&format!(
        "Available=True (Passed), {} after the server returned",
        text::duration(returned)
    ));

    heading("Stop");
    let pid = run.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status()?;
    let started = Instant::now();
    let status = run.0.wait()?;
    let took = started.elapsed();
    if status.code() != Some(0) {
        log.dump();
        return Err(format!("autoregister exited with {status} on SIGTERM").into());
    }
    line(&format!(
        "autoregister stopped cleanly on SIGTERM within {}",
        text::duration(took)
    ));
    backend.stop()?;
    if kube_apiservers_objects(&server) != builtins {
        return Err("kube-apiserver's APIServices changed".into());
    }

    heading("Summary");
    for l in [
        format!("autoregister registered the example aggregated server from one manifest, with the CA from Secret {NS}/{SECRET}."),
        "The discovery check reached the server over TLS and verified its certificate with that CA.".to_string(),
        format!("When the server stopped, the API was withdrawn after {WITHDRAW_AFTER} unavailable; when it returned, it was registered and available again within {}.", text::duration(returned)),
        format!("kube-apiserver's own {} were never touched.", text::count(builtins.len(), "APIService")),
    ] {
        line(&l);
    }
    Ok(())
}

/// The manifest: the example server's APIService, its CA named, not copied.
fn manifest(port: u16) -> String {
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {NAME}\n  \
         annotations:\n    autoregister.dev/inject-ca-from-secret: {NS}/{SECRET}\nspec:\n  \
         group: widgets.example.com\n  version: v1alpha1\n  groupPriorityMinimum: 1000\n  \
         versionPriority: 15\n  service:\n    namespace: {NS}\n    name: {SERVICE}\n    port: {port}\n"
    )
}

/// A CA and a serving certificate for `host`: (CA, certificate, key), PEM.
fn issue(host: &str) -> Result<(String, String, String)> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate()?;
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(DnType::CommonName, "widgets-demo-ca");
    let ca = p.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let mut p = CertificateParams::new(vec![host.to_string()])?;
    p.distinguished_name.push(DnType::CommonName, host);
    let cert = p.signed_by(&key, &ca, &ca_key)?;
    Ok((ca.pem(), cert.pem(), key.serialize_pem()))
}

/// Creates `obj` in the `widgets` namespace as another writer would.
fn create(plural: &str, obj: Value, server: &TestServer) -> Result<Value> {
    server
        .create_object_as("demo", plural, Some(NS), obj)
        .map_err(|e| format!("create {plural}: {}", e.message.unwrap_or_default()).into())
}

/// Marks the example server's endpoint ready or not, as the EndpointSlice controller does
/// for a Pod that starts or goes away.
fn set_ready(server: &TestServer, ready: bool) -> Result<()> {
    server
        .update_object_as(
            "demo",
            "endpointslices",
            Some(NS),
            &format!("{SERVICE}-1"),
            |s| {
                s["endpoints"][0]["conditions"]["ready"] = json!(ready);
            },
        )
        .map(|_| ())
        .map_err(|e| e.message.clone().unwrap_or_default().into())
}

fn exists(server: &TestServer) -> bool {
    server.get_object("apiservices", None, NAME).is_some()
}

/// The decoded `caBundle` of the APIService.
fn ca_bundle(server: &TestServer) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let obj = server.get_object("apiservices", None, NAME)?;
    base64::engine::general_purpose::STANDARD
        .decode(obj["spec"]["caBundle"].as_str()?)
        .ok()
}

/// `(status, reason)` of its `Available` condition.
fn available(server: &TestServer) -> (String, String) {
    let obj = server
        .get_object("apiservices", None, NAME)
        .unwrap_or_default();
    let c = obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
        .cloned()
        .unwrap_or_default();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (s("status"), s("reason"))
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

fn heading(text: &str) {
    println!("\n{text}");
}

fn line(text: &str) {
    println!("  {text}");
}

/// The example server, serving only (`--no-register`: autoregister registers it).
struct Backend(KillOnDrop);

impl Backend {
    fn start(example: &Path, work: &Path, ip: &str, port: u16) -> Result<Backend> {
        let child = Command::new(example)
            .args(["--no-register", "--listen", &format!("{ip}:{port}")])
            .args(["--service", &format!("{NS}/{SERVICE}"), "--port", &port.to_string()])
            .args(["--tls-cert".as_ref(), work.join("tls.crt").as_os_str()])
            .args(["--tls-key".as_ref(), work.join("tls.key").as_os_str()])
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot run {}: {e} (build it first: cargo build --features testing --example apiserver)",
                    example.display()
                )
            })?;
        let mut b = Backend(KillOnDrop(child));
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect((ip, port)).is_err() {
            if Instant::now() > deadline || b.0 .0.try_wait()?.is_some() {
                return Err(format!("the example server did not listen on {ip}:{port}").into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(b)
    }

    /// SIGTERM, and waits for it to exit.
    fn stop(&mut self) -> Result<()> {
        if self.0 .0.try_wait()?.is_none() {
            let pid = self.0 .0.id().to_string();
            Command::new("kill").args(["-TERM", &pid]).status()?;
            self.0 .0.wait()?;
        }
        Ok(())
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

/// The controller's log, collected by a thread: shown whole only when a step fails.
#[derive(Clone, Default)]
struct Log {
    lines: Arc<Mutex<Vec<String>>>,
}

impl Log {
    /// Starts collecting `child`'s stderr.
    fn relay(child: &mut Child) -> Log {
        let log = Log::default();
        if let Some(stderr) = child.stderr.take() {
            let l = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                    l.lock().push(line);
                }
            });
        }
        log
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        // A panic in the relay thread cannot leave the lines half-written: keep going.
        self.lines.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a line contains `needle`.
    fn has(&self, needle: &str) -> bool {
        self.lock().iter().any(|l| l.contains(needle))
    }

    /// The last log line containing `needle`, without its time and level.
    fn find(&self, needle: &str) -> String {
        let lines = self.lock();
        let found = lines.iter().rev().find(|l| l.contains(needle));
        // `TIME LEVEL text`; the level is padded to a width.
        let text = found.map_or("", |l| {
            l.split_once(' ')
                .and_then(|(_, rest)| rest.trim_start().split_once(' '))
                .map_or(l.as_str(), |(_, text)| text)
        });
        text.trim_start().to_string()
    }

    fn dump(&self) {
        for l in self.lock().iter() {
            eprintln!("    | {l}");
        }
    }
}

/// Polls `done` for at most 20 s; on a timeout prints the controller's log and fails.
fn wait(log: &Log, what: &str, mut done: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        if Instant::now() > deadline {
            log.dump();
            return Err(format!("timed out waiting: {what}").into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

//! The real kube-apiserver (with etcd, and kubernetes' sample-apiserver as an aggregated
//! backend) for the end-to-end tests: built by `make kube` from `tests/kube`, started once
//! per test binary on 127.0.0.1, stopped and removed when the binary ends.
//!
//! Everything stays on this machine: kube-apiserver, etcd and every backend listen on
//! loopback, the Service range is `127.1.0.0/24` (so the aggregator's dials to a Service's
//! ClusterIP land on loopback), and EndpointSlices name `*.localhost` and Endpoints
//! `192.0.2.1` (TEST-NET-1), which nothing dials (the aggregator routes through the
//! ClusterIP; endpoint validation refuses loopback IPs, `ValidateEndpointIP` in
//! `pkg/apis/core/validation`).
//!
//! The version is `AUTOREGISTER_KUBE_VERSION` (a line of `tests/kube/versions`), default
//! the newest; `make kube` builds each into a folder of its own.
//!
//! Use with `#[path = "support/kube.rs"] mod kube;` beside `mod binary;`.
#![allow(dead_code)]

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use autoregister::api::{APIService, ObjectMeta, Resource};
use autoregister::client::{Api, AuthConfig, Client, Config, ListParams};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

/// The Service range kube-apiserver allocates ClusterIPs from: inside loopback.
pub const SERVICE_RANGE: &str = "127.1.0.0/24";
/// How long kube-apiserver (or a backend) may take to become ready.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// The admin's bearer token (group `system:masters`).
pub const ADMIN_TOKEN: &str = "admin-token";
/// Ordinary users from the token file, bound to nothing: RBAC tests grant them what they need.
pub const USERS: [(&str, &str); 2] = [("alice-token", "alice"), ("bob-token", "bob")];

/// A certificate authority the harness issues certificates from.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    /// A fresh CA named `cn`.
    pub fn new(cn: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, cn);
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A serving (or, with `client`, client) certificate for `names` (DNS names or IPs),
    /// with common name `cn`: (certificate PEM, key PEM).
    pub fn issue(&self, cn: &str, names: &[&str], client: bool) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A running kube-apiserver with its etcd.
pub struct Kube {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The CA kube-apiserver's serving certificate is signed by (and client certificates).
    pub ca: Ca,
    /// etcd's client URL (sample-apiserver stores its objects there too, under its prefix).
    pub etcd_url: String,
    bin: PathBuf,
    dir: PathBuf,
    /// The components, to notice one that exited.
    procs: Mutex<Vec<(String, Child)>>,
    /// kube-apiserver's arguments, to start it again after [`Kube::stop_apiserver`].
    apiserver_args: Mutex<Vec<String>>,
    /// Held open for the life of the test binary: when it closes, the guards stop everything.
    guards: Mutex<Vec<ChildStdin>>,
}

static KUBE: OnceLock<Result<Kube, String>> = OnceLock::new();

/// The test binary's kube-apiserver, started on first use. A start that failed fails
/// every test that asks, at once, with the same message.
pub fn kube() -> &'static Kube {
    let started = KUBE.get_or_init(|| {
        std::panic::catch_unwind(Kube::start).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    });
    match started {
        Ok(k) => k,
        Err(e) => panic!("the real kube-apiserver could not be started: {e}"),
    }
}

/// The Kubernetes versions the suite supports, newest first (`tests/kube/versions`).
pub fn versions() -> Vec<&'static str> {
    include_str!("../kube/versions")
        .lines()
        .filter_map(|l| l.split('#').next()?.split_whitespace().next())
        .collect()
}

/// The version this test binary runs against: `AUTOREGISTER_KUBE_VERSION`, else the newest
/// listed. A version not listed fails every test that asks, with the listed ones named.
pub fn version() -> &'static str {
    static VERSION: OnceLock<Result<&'static str, String>> = OnceLock::new();
    let chosen = VERSION.get_or_init(|| {
        let listed = versions();
        match std::env::var("AUTOREGISTER_KUBE_VERSION") {
            Err(_) => Ok(listed[0]),
            Ok(v) => listed.iter().find(|l| **l == v).copied().ok_or_else(|| {
                format!(
                    "AUTOREGISTER_KUBE_VERSION={v:?} is not a listed Kubernetes version (tests/kube/versions): {}",
                    listed.join(", ")
                )
            }),
        }
    });
    match chosen {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

/// The minor of [`version`] (`31` for `v1.31.14`), for the few places a test states how an
/// older kube-apiserver answers.
pub fn minor() -> u32 {
    version()
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "tests/kube/versions: {:?} is not vMAJOR.MINOR.PATCH",
                version()
            )
        })
}

/// Where `make kube` put the components of [`version`]: that version's folder in
/// `AUTOREGISTER_KUBE_BIN`, else in `kube/` of the target directory this test binary runs
/// from (`<target>/debug/deps/<test>`).
fn bin_dir() -> PathBuf {
    let root = match std::env::var_os("AUTOREGISTER_KUBE_BIN") {
        Some(d) => PathBuf::from(d),
        None => {
            let exe = std::env::current_exe().unwrap();
            exe.ancestors().nth(3).unwrap().join("kube")
        }
    };
    root.join(version())
}

/// A free port on 127.0.0.1 for a process the test starts (the probing listener is closed
/// before the port is handed out). Taken below Linux's ephemeral range (32768–60999), from
/// a counter of this test binary: a port the OS hands out for `bind(:0)` in between — a
/// parallel test's server, a client's connection — could otherwise take it before
/// kube-apiserver or etcd binds it ("address already in use").
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    const FIRST: u16 = 20_000;
    const SPAN: u16 = 12_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // Binaries of one `cargo test` run one after another; a start apart per process keeps
    // two binaries run at once (make soak, two checkouts) from walking the same ports.
    let base = (std::process::id() % u32::from(SPAN)) as u16;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = FIRST + (base.wrapping_add(n.wrapping_mul(7)) % SPAN);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 127.0.0.1:{FIRST}..{}", FIRST + SPAN)
}

impl Kube {
    fn start() -> Kube {
        let bin = bin_dir();
        for b in ["kube-apiserver", "etcd", "sample-apiserver"] {
            assert!(
                bin.join(b).is_file(),
                "the real {b} {} is not built in {}: run `scripts/kube-build.sh {} {}` (make test does), or set AUTOREGISTER_KUBE_BIN",
                version(),
                bin.display(),
                bin.parent().unwrap_or(&bin).display(),
                version()
            );
        }
        let dir = std::env::temp_dir().join(format!("autoregister-kube-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ca = Ca::new("autoregister-test-ca");
        let front = Ca::new("autoregister-front-proxy-ca");
        let w = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p.to_str().unwrap().to_string()
        };
        let (srv, srv_key) = ca.issue(
            "kube-apiserver",
            &[
                "127.0.0.1",
                "localhost",
                "127.1.0.1",
                "kubernetes.default.svc",
            ],
            false,
        );
        let (proxy, proxy_key) = front.issue("front-proxy-client", &[], true);
        let sa = KeyPair::generate().unwrap();
        let mut tokens = format!("{ADMIN_TOKEN},admin,admin-uid,\"system:masters\"\n");
        for (t, u) in USERS {
            tokens.push_str(&format!("{t},{u},{u}-uid\n"));
        }

        let guards = Mutex::new(Vec::new());
        let mut kube = Kube {
            url: String::new(),
            ca,
            etcd_url: String::new(),
            bin: bin.clone(),
            dir: dir.clone(),
            procs: Mutex::new(Vec::new()),
            apiserver_args: Mutex::new(Vec::new()),
            guards,
        };
        let etcd_port = free_port();
        kube.etcd_url = format!("http://127.0.0.1:{etcd_port}");
        kube.spawn(
            "etcd",
            &[
                "--data-dir",
                dir.join("etcd").to_str().unwrap(),
                "--listen-client-url",
                &kube.etcd_url,
                "--listen-peer-url",
                &format!("http://127.0.0.1:{}", free_port()),
            ],
            &dir.join("etcd.log"),
        );
        let port = free_port();
        kube.url = format!("https://127.0.0.1:{port}");
        let args = [
            format!("--etcd-servers={}", kube.etcd_url),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            // The default/kubernetes Endpoints would name 127.0.0.1, which Endpoints
            // validation refuses; nothing here needs them.
            "--endpoint-reconciler-type=none".into(),
            format!("--tls-cert-file={}", w("apiserver.crt", &srv)),
            format!("--tls-private-key-file={}", w("apiserver.key", &srv_key)),
            format!("--client-ca-file={}", w("ca.crt", &kube.ca.pem())),
            format!("--token-auth-file={}", w("tokens.csv", &tokens)),
            "--authorization-mode=Node,RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!(
                "--service-account-key-file={}",
                w("sa.pub", &sa.public_key_pem())
            ),
            format!(
                "--service-account-signing-key-file={}",
                w("sa.key", &sa.serialize_pem())
            ),
            format!("--service-cluster-ip-range={SERVICE_RANGE}"),
            // The aggregation layer: kube-apiserver proxies to backends as front-proxy-client.
            format!(
                "--requestheader-client-ca-file={}",
                w("front-proxy-ca.crt", &front.pem())
            ),
            "--requestheader-allowed-names=front-proxy-client".into(),
            "--requestheader-username-headers=X-Remote-User".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            format!(
                "--proxy-client-cert-file={}",
                w("front-proxy-client.crt", &proxy)
            ),
            format!(
                "--proxy-client-key-file={}",
                w("front-proxy-client.key", &proxy_key)
            ),
            format!("--cert-dir={}", dir.join("certs").display()),
            "--profiling=false".into(),
        ];
        *kube.apiserver_args.lock().unwrap() = args.to_vec();
        kube.start_apiserver_process();
        std::fs::write(dir.join("kubeconfig"), kube.kubeconfig(ADMIN_TOKEN)).unwrap();
        kube.wait_ready();
        print_log_on_failure(dir.join("kube-apiserver.log"));
        kube
    }

    fn start_apiserver_process(&self) {
        let args = self.apiserver_args.lock().unwrap().clone();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Appended: a restart's log follows the first run's.
        self.spawn(
            "kube-apiserver",
            &args,
            &self.dir.join("kube-apiserver.log"),
        );
    }

    /// The process id of component `name` (`kube-apiserver`, `etcd`), for benchmarks that
    /// read its CPU time.
    pub fn pid(&self, name: &str) -> Option<u32> {
        let procs = self.procs.lock().unwrap();
        procs.iter().find(|(n, _)| n == name).map(|(_, c)| c.id())
    }

    /// Kills kube-apiserver (etcd keeps the data) and waits until it is gone; for tests of
    /// an outage, in a test binary of their own (the server is shared within one).
    pub fn stop_apiserver(&self) {
        let mut procs = self.procs.lock().unwrap();
        for (_, child) in procs.iter_mut().filter(|(n, _)| n == "kube-apiserver") {
            let _ = child.kill();
            let _ = child.wait();
        }
        procs.retain(|(n, _)| n != "kube-apiserver");
    }

    /// Starts kube-apiserver again on the same address and waits until it is ready.
    pub fn start_apiserver(&self) {
        self.start_apiserver_process();
        self.wait_ready();
    }

    /// Starts `bin/<name>` with its output in `log`, under a guard that ends it (and, for
    /// the last guard, removes the directory) when this test binary exits, however it exits.
    fn spawn(&self, name: &str, args: &[&str], log: &Path) {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(self.bin.join(name))
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        self.guard(child.id());
        self.procs.lock().unwrap().push((name.to_string(), child));
    }

    fn guard(&self, pid: u32) {
        let g = guard(pid, Some(&self.dir));
        self.guards.lock().unwrap().push(g);
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + READY_WITHIN;
        let api = self.apiservices();
        loop {
            let listed = api.list(&ListParams::default()).ok();
            let builtins = listed.as_ref().is_some_and(|l| {
                l.items
                    .iter()
                    .any(|a| a.metadata.name.as_deref() == Some("v1.apps"))
            });
            if builtins {
                let (ok, out, _) = self.kubectl(&["get", "--raw", "/readyz"]);
                if ok && out.trim() == "ok" {
                    return;
                }
            }
            for (name, child) in self.procs.lock().unwrap().iter_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "{name} exited with {status} before kube-apiserver was ready; the end of its log:\n{}",
                        tail(&self.dir.join(format!("{name}.log")), 20)
                    );
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "kube-apiserver did not become ready within {READY_WITHIN:?}; the end of its log:\n{}\nthe end of etcd's log:\n{}",
                    tail(&self.dir.join("kube-apiserver.log"), 40),
                    tail(&self.dir.join("etcd.log"), 10)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The admin's kubeconfig file (for tools such as helm that read one).
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// A kubeconfig for this server authenticating with `token`.
    pub fn kubeconfig(&self, token: &str) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca.pem());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kube\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: kube\n  context:\n    cluster: kube\n    user: user\ncurrent-context: kube\n",
            self.url
        )
    }

    /// A client for this server authenticating with `token`.
    pub fn client_as(&self, token: &str) -> Client {
        let mut c = Config::new(self.url.clone());
        c.tls.ca_pem = Some(self.ca.pem().into_bytes());
        c.auth = AuthConfig::Token(token.to_string());
        Client::new(c).unwrap()
    }

    /// The admin's client.
    pub fn client(&self) -> Client {
        self.client_as(ADMIN_TOKEN)
    }

    /// APIServices, as the admin.
    pub fn apiservices(&self) -> Api<APIService> {
        Api::all(self.client())
    }

    /// The APIService `name`, if it exists.
    pub fn get_apiservice(&self, name: &str) -> Option<APIService> {
        match self.apiservices().get(name) {
            Ok(a) => Some(a),
            Err(e) if e.is_not_found() => None,
            Err(e) => panic!("get {name}: {e}"),
        }
    }

    /// `kubectl ARGS` as the admin: (success, stdout, stderr).
    pub fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        self.kubectl_stdin(args, "")
    }

    /// `kubectl ARGS` as the admin with `stdin`: (success, stdout, stderr).
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> (bool, String, String) {
        let mut child = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", self.dir.join("kubeconfig"))
            .env("HOME", &self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl on the PATH");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `kubectl apply -f -` of `yaml` as the admin; panics with kubectl's message on failure.
    pub fn apply(&self, yaml: &str) {
        let (ok, out, err) = self.kubectl_stdin(&["apply", "-f", "-"], yaml);
        assert!(ok, "kubectl apply failed: {out}{err}\n{yaml}");
    }

    /// The last `n` lines of kube-apiserver's log.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.dir.join("kube-apiserver.log"), n)
    }

    /// A scratch directory inside the server's directory (removed with it).
    pub fn scratch(&self, name: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// The namespace `ns`, a Service `name` (ClusterIP from the loopback range) and a ready
    /// EndpointSlice and Endpoints for it, for a backend the test starts itself on `ip:port`.
    /// Both, as a cluster's controllers keep both: kube-aggregator up to v1.33 decides
    /// availability from the Endpoints, v1.34 on from the EndpointSlices
    /// (kubernetes/kubernetes#129837).
    pub fn loopback_service(&self, ns: &str, name: &str) -> LoopbackService {
        let port = free_port();
        self.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\n\
             apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  ports:\n  - name: https\n    port: {port}\n    protocol: TCP\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels:\n    kubernetes.io/service-name: {name}\n\
             addressType: FQDN\nendpoints:\n- addresses: [backend.localhost]\n  conditions:\n    ready: true\nports:\n- name: https\n  port: {port}\n  protocol: TCP\n---\n{}",
            endpoints_yaml(ns, name, port, true)
        ));
        let (ok, ip, err) = self.kubectl(&[
            "-n",
            ns,
            "get",
            "service",
            name,
            "-o",
            "jsonpath={.spec.clusterIP}",
        ]);
        assert!(ok && ip.starts_with("127."), "ClusterIP {ip:?}: {err}");
        LoopbackService {
            namespace: ns.to_string(),
            service: name.to_string(),
            ip,
            port,
        }
    }

    /// Starts kubernetes' sample-apiserver (group `wardle.example.com`) as the backend of
    /// Service `ns/name`: the namespace, the Service (ClusterIP from the loopback range)
    /// and a ready EndpointSlice are created, and the server listens on the ClusterIP with
    /// a serving certificate for `name.ns.svc` from a CA of its own.
    pub fn sample_apiserver(&self, ns: &str, name: &str) -> Backend {
        let svc = self.loopback_service(ns, name);
        let ca = Ca::new("sample-apiserver-ca");
        let dir = self.scratch(&format!("backend-{ns}-{name}"));
        let (cert, key) = ca.issue(&svc.host(), &[&svc.host(), &svc.ip], false);
        let w = |f: &str, text: &str| {
            std::fs::write(dir.join(f), text).unwrap();
            dir.join(f).to_str().unwrap().to_string()
        };
        let kc = self.dir.join("kubeconfig");
        let kc = kc.to_str().unwrap();
        let args = vec![
            "--secure-port".to_string(),
            svc.port.to_string(),
            "--bind-address".into(),
            svc.ip.clone(),
            "--tls-cert-file".into(),
            w("tls.crt", &cert),
            "--tls-private-key-file".into(),
            w("tls.key", &key),
            "--etcd-servers".into(),
            self.etcd_url.clone(),
            "--etcd-prefix".into(),
            format!("/sample-{ns}-{name}"),
            "--authentication-kubeconfig".into(),
            kc.into(),
            "--authorization-kubeconfig".into(),
            kc.into(),
            "--kubeconfig".into(),
            kc.into(),
        ];
        let mut b = Backend {
            svc,
            ca,
            dir: dir.clone(),
            args,
            log: dir.join("sample-apiserver.log"),
            bin: self.bin.join("sample-apiserver"),
            child: None,
        };
        b.start();
        b
    }
}

/// A Service on the loopback range with a ready EndpointSlice ([`Kube::loopback_service`]):
/// a backend listening on `ip:port` is what kube-apiserver's aggregator reaches.
pub struct LoopbackService {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub service: String,
    /// Its ClusterIP.
    pub ip: String,
    /// Its port.
    pub port: u16,
}

impl LoopbackService {
    /// `ip:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    /// `SERVICE.NAMESPACE.svc`: the name kube-aggregator verifies a backend's certificate for.
    pub fn host(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }

    /// Marks the endpoint ready or not, as the EndpointSlice controller would for its Pod.
    pub fn set_ready(&self, ready: bool) {
        let patch = format!(
            r#"[{{"op":"replace","path":"/endpoints/0/conditions/ready","value":{ready}}}]"#
        );
        let slice = format!("{}-1", self.service);
        let (ok, out, err) = kube().kubectl(&[
            "-n",
            &self.namespace,
            "patch",
            "endpointslice",
            &slice,
            "--type=json",
            "-p",
            &patch,
        ]);
        assert!(ok, "{out}{err}");
        kube().apply(&endpoints_yaml(
            &self.namespace,
            &self.service,
            self.port,
            ready,
        ));
    }
}

impl LoopbackService {
    /// Deletes its EndpointSlice and its Endpoints: the Service has no endpoints at all,
    /// whichever kube-aggregator reads (v1.33 and older the Endpoints, v1.34 on the slices).
    pub fn remove_endpoints(&self) {
        let slice = format!("{}-1", self.service);
        for (kind, name) in [
            ("endpointslice", slice.as_str()),
            ("endpoints", &self.service),
        ] {
            let (ok, out, err) = kube().kubectl(&["-n", &self.namespace, "delete", kind, name]);
            assert!(ok, "delete {kind} {name}: {out}{err}");
        }
    }
}

/// The Endpoints of Service `ns/name` with one address, ready or not. The address is
/// TEST-NET-1 because Endpoints validation refuses loopback; nothing dials it.
fn endpoints_yaml(ns: &str, name: &str, port: u16, ready: bool) -> String {
    let addresses = if ready {
        "addresses"
    } else {
        "notReadyAddresses"
    };
    format!(
        "apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         subsets:\n- {addresses}:\n  - ip: 192.0.2.1\n  ports:\n  - name: https\n    port: {port}\n    protocol: TCP\n"
    )
}

/// An aggregated API server process behind a loopback Service, whose EndpointSlice says
/// ready while it runs (as the EndpointSlice controller would say of its Pod).
pub struct Backend {
    /// Its Service and endpoint (it listens on the ClusterIP and the Service's port).
    pub svc: LoopbackService,
    /// The CA of its first serving certificate (an APIService's `caBundle`).
    pub ca: Ca,
    dir: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    bin: PathBuf,
    child: Option<Child>,
}

impl Backend {
    /// Starts the process, waits until it accepts connections, and marks its endpoint ready.
    pub fn start(&mut self) {
        self.run();
        self.svc.set_ready(true);
    }

    /// Marks its endpoint not ready, then kills the process and waits for it.
    pub fn stop(&mut self) {
        self.svc.set_ready(false);
        self.kill();
    }

    /// Replaces its serving certificate with one from `ca` (written atomically; the server
    /// reloads the files, as every k8s.io/apiserver does) and waits until it serves it.
    pub fn serve_from(&self, ca: &Ca) {
        let host = self.svc.host();
        let (cert, key) = ca.issue(&host, &[&host, &self.svc.ip], false);
        for (f, text) in [("tls.key", &key), ("tls.crt", &cert)] {
            let tmp = self.dir.join(format!(".{f}.tmp"));
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, self.dir.join(f)).unwrap();
        }
        let deadline = Instant::now() + READY_WITHIN;
        while !self.serves_from(ca) {
            assert!(
                Instant::now() < deadline,
                "the backend did not load its new certificate within {READY_WITHIN:?}:\n{}",
                tail(&self.log, 20)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether a TLS handshake that trusts only `ca` succeeds with the backend (any HTTP
    /// answer, even 401, means it did).
    pub fn serves_from(&self, ca: &Ca) -> bool {
        let mut c = Config::new(format!("https://{}", self.svc.addr()));
        c.tls.ca_pem = Some(ca.pem().into_bytes());
        c.tls.server_name = Some(self.svc.host());
        let Ok(client) = Client::new(c) else {
            return false;
        };
        match Api::<APIService>::all(client).list(&ListParams::default()) {
            Ok(_) | Err(autoregister::client::Error::Api(_)) => true,
            Err(_) => false,
        }
    }

    fn run(&mut self) {
        assert!(self.child.is_none(), "already running");
        let out = std::fs::File::create(&self.log).unwrap();
        let child = Command::new(&self.bin)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        // Ended with the test binary, like kube-apiserver.
        let g = guard(child.id(), None);
        if let Some(Ok(k)) = KUBE.get() {
            k.guards.lock().unwrap().push(g);
        }
        self.child = Some(child);
        let deadline = Instant::now() + READY_WITHIN;
        while std::net::TcpStream::connect(self.svc.addr()).is_err() {
            assert!(
                Instant::now() < deadline,
                "sample-apiserver did not listen on {} within {READY_WITHIN:?}:\n{}",
                self.svc.addr(),
                tail(&self.log, 30)
            );
            if let Some(Some(status)) = self.child.as_mut().map(|c| c.try_wait().ok().flatten()) {
                panic!(
                    "sample-apiserver exited with {status}:\n{}",
                    tail(&self.log, 30)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A shell that waits for its standard input to close (this test binary ending, however it
/// ends) and then stops process `pid` and removes `dir`: no process or file outlives the
/// test binary. Answers the shell's standard input, to hold open until then.
fn guard(pid: u32, dir: Option<&Path>) -> ChildStdin {
    // SIGKILL: a test server needs no graceful shutdown, and kube-apiserver's waits for
    // etcd, which may be gone. The wait is bounded: an exited child may stay a zombie.
    let script = "read _; kill -9 \"$1\" 2>/dev/null; i=0; \
                  while kill -0 \"$1\" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; \
                  [ -n \"$2\" ] && rm -rf \"$2\"";
    let mut g = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("guard")
        .arg(pid.to_string())
        .arg(dir.map(|d| d.as_os_str().to_owned()).unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = g.stdin.take().unwrap();
    // The shell outlives this handle by design; it exits on its own.
    drop(g);
    stdin
}

/// The last `n` lines of the file at `path`.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A failing test also prints the end of kube-apiserver's log.
fn print_log_on_failure(log: PathBuf) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        eprintln!(
            "--- the end of kube-apiserver's log ({}) ---\n{}",
            log.display(),
            tail(&log, 30)
        );
    }));
}

impl crate::binary::Target for Kube {
    fn kubeconfig_text(&self) -> String {
        self.kubeconfig(ADMIN_TOKEN)
    }
}

/// A sample-apiserver `Flunder` (namespaced, `wardle.example.com/v1alpha1`): enough to
/// list them through kube-apiserver's aggregator with the crate's client.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Flunder {
    /// Its metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
}

impl Resource for Flunder {
    const GROUP: &'static str = "wardle.example.com";
    const VERSION: &'static str = "v1alpha1";
    const KIND: &'static str = "Flunder";
    const PLURAL: &'static str = "flunders";
    const NAMESPACED: bool = true;

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

//! Driving the real `autoregister` binary in tests: scratch folders, the process and its
//! log, signals, waiting on conditions, and manifests / stored objects to compare.
//!
//! Use with `#[path = "support/binary.rs"] mod binary;` from a test crate built with the
//! `testing` feature.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use autoregister::testserver::{RequestRecord, TestServer};
use serde_json::{json, Value};

/// How long a condition may take before the test fails; generous for a loaded 2-core machine.
pub const WAIT: Duration = Duration::from_secs(20);

/// Polls `f` until it holds or `WAIT` passes; returns its last answer.
pub fn wait_until(f: impl FnMut() -> bool) -> bool {
    wait_until_for(WAIT, f)
}

/// Polls `f` until it holds or `timeout` passes; returns its last answer.
pub fn wait_until_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Polls `f` every 10 ms until it holds or `timeout` passes; returns its last answer.
pub fn wait_until_within(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

/// A server the binary can be pointed at: the test server or the real kube-apiserver.
pub trait Target {
    /// A kubeconfig (YAML) with the server's admin credentials.
    fn kubeconfig_text(&self) -> String;
}

impl Target for TestServer {
    fn kubeconfig_text(&self) -> String {
        self.kubeconfig()
    }
}

/// A scratch directory with a `manifests/` folder, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh directory; `tag` keeps parallel tests apart.
    pub fn new(tag: &str) -> Scratch {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("autoregister-bin-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("manifests")).unwrap();
        Scratch(dir)
    }

    /// `name` inside the scratch directory (beside `manifests/`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The manifests folder.
    pub fn manifests(&self) -> PathBuf {
        self.0.join("manifests")
    }

    /// Writes `file` in the manifests folder atomically (write, then rename).
    pub fn write(&self, file: &str, text: &str) {
        let tmp = self.0.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.manifests().join(file)).unwrap();
    }

    /// Writes `file` (any bytes) in the manifests folder atomically (write, then rename).
    pub fn write_bytes(&self, file: &str, bytes: &[u8]) {
        let tmp = self.0.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, self.manifests().join(file)).unwrap();
    }

    /// Removes `file` from the manifests folder.
    pub fn remove(&self, file: &str) {
        std::fs::remove_file(self.manifests().join(file)).unwrap();
    }

    /// A kubeconfig for `server`.
    pub fn kubeconfig(&self, server: &(impl Target + ?Sized)) -> PathBuf {
        let path = self.0.join("kubeconfig");
        std::fs::write(&path, server.kubeconfig_text()).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One APIService manifest (YAML) named `v1.<group>`, with `labels` as given.
pub fn manifest(group: &str, labels: &[(&str, &str)], version_priority: i64) -> String {
    let labels = if labels.is_empty() {
        String::new()
    } else {
        let mut s = "  labels:\n".to_string();
        for (k, v) in labels {
            s.push_str(&format!("    {k}: \"{v}\"\n"));
        }
        s
    };
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.{group}\n{labels}spec:\n  \
         group: {group}\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: {version_priority}\n  \
         service:\n    namespace: ns\n    name: svc\n    port: 443\n  insecureSkipTLSVerify: true\n"
    )
}

/// The object the server would hold for `manifest(group, labels, priority)`, for seeding.
pub fn object(group: &str, labels: &[(&str, &str)], version_priority: i64) -> Value {
    let mut v = json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": format!("v1.{group}")},
        "spec": {
            "group": group, "version": "v1", "groupPriorityMinimum": 100,
            "versionPriority": version_priority,
            "service": {"namespace": "ns", "name": "svc", "port": 443},
            "insecureSkipTLSVerify": true
        }
    });
    if !labels.is_empty() {
        let map: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        v["metadata"]["labels"] = Value::Object(map);
    }
    v
}

/// The object stored under `name`.
pub fn stored(server: &TestServer, name: &str) -> Option<Value> {
    server.get_object("apiservices", None, name)
}

/// The stored object's UID.
pub fn uid(server: &TestServer, name: &str) -> Option<String> {
    stored(server, name).and_then(|o| o["metadata"]["uid"].as_str().map(str::to_string))
}

/// Whether a logged request is a write (create, update, patch, delete).
pub fn is_write(r: &RequestRecord) -> bool {
    matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete")
}

/// Whether a logged write is a dry run where kube-apiserver looks for it: a delete's
/// `DeleteOptions` body when it has one, else the query (apiserver handlers/delete.go).
pub fn is_dry_run(r: &RequestRecord) -> bool {
    match (&r.body, r.verb.as_str()) {
        (Some(body), "delete") => body["dryRun"] == json!(["All"]),
        _ => r.query.split('&').any(|kv| kv == "dryRun=All"),
    }
}

/// Writes the server logged for `name`, as `verb code`.
pub fn writes(server: &TestServer, name: &str) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.name.as_deref() == Some(name) && is_write(r))
        .map(|r| format!("{} {}", r.verb, r.code))
        .collect()
}

/// The proxy variables Go (and ureq) read; removed from every process a test starts.
pub const PROXY_VARS: [&str; 8] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// The running binary, its stdout and stderr collected by threads.
pub struct Proc {
    child: Child,
    /// Both streams, lines interleaved as they were read.
    log: Arc<Mutex<String>>,
    /// Each stream on its own (stderr, stdout): the order between the two is not kept.
    streams: [Arc<Mutex<String>>; 2],
    /// How many of the two pipes reached end of file.
    closed: Arc<AtomicUsize>,
}

impl Proc {
    /// Starts the binary with `args` at `RUST_LOG=info`.
    pub fn spawn(args: &[&str]) -> Proc {
        Proc::spawn_env(args, &[])
    }

    /// Starts the binary with `args` and `env` (e.g. `RUST_LOG=trace`) over the defaults.
    pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Proc {
        let mut command = Command::new(env!("CARGO_BIN_EXE_autoregister"));
        // The runner's proxies are not the test's: only what `env` sets applies.
        for var in PROXY_VARS {
            command.env_remove(var);
        }
        let mut child = command
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let streams: [Arc<Mutex<String>>; 2] = Default::default();
        let closed = Arc::new(AtomicUsize::new(0));
        for (stream, own) in [
            Box::new(child.stderr.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().unwrap()),
        ]
        .into_iter()
        .zip(streams.clone())
        {
            let (log, closed) = (log.clone(), closed.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    own.lock().unwrap().push_str(&format!("{line}\n"));
                    log.lock().unwrap().push_str(&(line + "\n"));
                }
                closed.fetch_add(1, Ordering::SeqCst);
            });
        }
        Proc {
            child,
            log,
            streams,
            closed,
        }
    }

    /// `autoregister <command> --manifests <scratch> --kubeconfig <for server> <extra>`.
    pub fn command(
        command: &str,
        server: &(impl Target + ?Sized),
        scratch: &Scratch,
        extra: &[&str],
    ) -> Proc {
        Proc::command_env(command, server, scratch, extra, &[])
    }

    /// [`command`](Self::command) with `env` over the defaults.
    pub fn command_env(
        command: &str,
        server: &(impl Target + ?Sized),
        scratch: &Scratch,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        let kc = scratch.kubeconfig(server);
        let manifests = scratch.manifests();
        let mut args = vec![
            command,
            "--manifests",
            manifests.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Proc::spawn_env(&args, env)
    }

    /// `autoregister run ...` (see [`command`](Self::command)).
    pub fn run(server: &(impl Target + ?Sized), scratch: &Scratch, extra: &[&str]) -> Proc {
        Proc::command("run", server, scratch, extra)
    }

    /// [`run`](Self::run) with `env` over the defaults.
    pub fn run_env(
        server: &(impl Target + ?Sized),
        scratch: &Scratch,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        Proc::command_env("run", server, scratch, extra, env)
    }

    /// `autoregister run --manifests <scratch> --kubeconfig <kubeconfig> <extra>`.
    pub fn run_with_kubeconfig(kubeconfig: &Path, scratch: &Scratch, extra: &[&str]) -> Proc {
        let manifests = scratch.manifests();
        let mut args = vec![
            "run",
            "--manifests",
            manifests.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Proc::spawn(&args)
    }

    /// Everything printed so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits for exit; returns the code, then stdout whole followed by stderr (a report
    /// on stdout is not cut by a log line that stderr's reader happened to read first).
    pub fn wait_exit_stdout_first(mut self, timeout: Duration) -> (i32, String) {
        let Some(code) = self.wait_for_exit(timeout) else {
            let _ = self.child.kill();
            panic!("did not exit within {timeout:?}:\n{}", self.log());
        };
        self.drain();
        let [err, out] = &self.streams;
        let text = format!("{}{}", out.lock().unwrap(), err.lock().unwrap());
        (code, text)
    }

    /// Waits until the log shows `needle`; fails the test otherwise.
    pub fn wait_log(&self, needle: &str) {
        assert!(
            wait_until(|| self.log().contains(needle)),
            "log never showed {needle:?}:\n{}",
            self.log()
        );
    }

    /// The `host:port` of the operations endpoint, from its (single) announcement.
    pub fn ops_addr(&self) -> String {
        let marker = "operations endpoint on http://";
        self.wait_log(marker);
        let log = self.log();
        log.split(marker)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_string()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Polls for exit; the exit code, or `None` while still running after `timeout`.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status.code().unwrap_or(-1));
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits (at most 5 s) until both pipes are closed, so the log is complete.
    pub fn drain(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.closed.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for exit; returns the code and everything it printed.
    pub fn wait_exit(mut self, timeout: Duration) -> (i32, String) {
        match self.wait_for_exit(timeout) {
            Some(code) => {
                self.drain();
                (code, self.log())
            }
            None => {
                let _ = self.child.kill();
                panic!("did not exit within {timeout:?}:\n{}", self.log());
            }
        }
    }

    /// Sends `signal` (e.g. `TERM`, `STOP`, `CONT`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGTERM, then waits for a clean exit.
    pub fn terminate(self) -> (i32, String) {
        self.signal("TERM");
        self.wait_exit(Duration::from_secs(10))
    }

    /// The exit code if the process has exited (-1: ended by a signal).
    pub fn exited(&mut self) -> Option<i32> {
        self.child
            .try_wait()
            .ok()
            .flatten()
            .map(|s| s.code().unwrap_or(-1))
    }

    /// Waits up to `timeout` for the exit; the code (none after a timeout, when the
    /// process is killed) and the log. For callers that judge a slow exit themselves.
    pub fn wait_exit_within(mut self, timeout: Duration) -> (Option<i32>, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(code) = self.exited() {
                // Let the reader threads drain the pipes (they end at EOF).
                std::thread::sleep(Duration::from_millis(50));
                return (Some(code), self.log());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return (None, self.log());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, then [`wait_exit_within`](Self::wait_exit_within).
    pub fn terminate_within(self, timeout: Duration) -> (Option<i32>, String) {
        self.signal("TERM");
        self.wait_exit_within(timeout)
    }

    /// SIGKILL (a crash), waiting until it is gone.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Peak resident memory so far in bytes (`VmHWM`), if /proc tells.
    pub fn peak_rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET on loopback: status and body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The binary's path, for tests that only need its exit code and output.
pub fn exe() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_autoregister"))
}

/// (year, month, day), UTC, of `days` from today (negative: before), as the crate writes
/// dates (`api::time`): for certificates that expire on a given day.
pub fn date_in_days(days: i64) -> (i32, u8, u8) {
    let now = std::time::SystemTime::now();
    let shift = Duration::from_secs(days.unsigned_abs() * 86_400);
    let t = if days < 0 { now - shift } else { now + shift };
    let text = autoregister::api::time::format_rfc3339(t);
    let field = |r: std::ops::Range<usize>| text[r].parse::<i32>().unwrap();
    (field(0..4), field(5..7) as u8, field(8..10) as u8)
}

//! The real `autoregister` binary as a child process: scratch directories, spawning
//! with a kubeconfig for a test server, log capture, SIGTERM and peak memory.
#![allow(dead_code)] // each test file uses part of this

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use autoregister::testserver::TestServer;

/// A scratch directory (with a `manifests/` inside) removed on drop.
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

    /// The manifests directory.
    pub fn manifests(&self) -> PathBuf {
        self.0.join("manifests")
    }

    /// Writes a manifest file atomically (write, then rename), so no half file is read.
    pub fn write(&self, file: &str, text: &[u8]) {
        let tmp = self.0.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.manifests().join(file)).unwrap();
    }

    /// Removes a manifest file if it is there.
    pub fn remove(&self, file: &str) {
        let _ = std::fs::remove_file(self.manifests().join(file));
    }

    /// A kubeconfig for `server`, written into the scratch directory.
    pub fn kubeconfig(&self, server: &TestServer) -> PathBuf {
        let path = self.0.join("kubeconfig");
        server.write_kubeconfig(&path).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An APIService manifest for `v1.{group}` without labels (synced continuously).
pub fn manifest(group: &str, version_priority: i64) -> String {
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.{group}\nspec:\n  \
         group: {group}\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: {version_priority}\n  \
         service:\n    namespace: ns\n    name: svc\n    port: 443\n  insecureSkipTLSVerify: true\n"
    )
}

/// The running binary, its stdout and stderr collected by threads.
pub struct Proc {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Proc {
    /// Starts the binary with `args` and `RUST_LOG=info`.
    pub fn spawn(args: &[&str]) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_autoregister"))
            .args(args)
            .env("RUST_LOG", "info")
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        for stream in [
            Box::new(child.stderr.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().unwrap()),
        ] {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    log.lock().unwrap().push_str(&(line + "\n"));
                }
            });
        }
        Proc { child, log }
    }

    /// `run --manifests DIR --kubeconfig FILE` plus `extra`.
    pub fn run(server: &TestServer, scratch: &Scratch, extra: &[&str]) -> Proc {
        let kc = scratch.kubeconfig(server);
        let manifests = scratch.manifests();
        let mut args = vec![
            "run",
            "--manifests",
            manifests.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Proc::spawn(&args)
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Everything printed so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits (up to `timeout`) until the log contains `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        assert!(
            wait_until(timeout, || self.log().contains(needle)),
            "log never showed {needle:?}:\n{}",
            self.log()
        );
    }

    /// The exit code if the process has exited.
    pub fn exited(&mut self) -> Option<i32> {
        self.child
            .try_wait()
            .ok()
            .flatten()
            .map(|s| s.code().unwrap_or(-1))
    }

    /// Waits for exit; returns the code (None on timeout, after a SIGKILL) and the log.
    pub fn wait_exit(mut self, timeout: Duration) -> (Option<i32>, String) {
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

    /// Sends SIGTERM.
    pub fn signal_term(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGTERM, then waits for the exit.
    pub fn terminate(self, timeout: Duration) -> (Option<i32>, String) {
        self.signal_term();
        self.wait_exit(timeout)
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

/// Polls `f` every 10 ms until it holds or `timeout` passes; the last answer.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

//! Driving the real `autoregister` binary from tests: scratch directories, the running
//! process with its log collected, signals, and waiting for conditions with a deadline.
//!
//! Use from a test crate (feature `testing`) with `#[path = "support/binary.rs"] mod binary;`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use autoregister::testserver::TestServer;

/// Generous deadline for conditions on a loaded 2-core machine; typical waits are short.
pub const WAIT: Duration = Duration::from_secs(20);

/// A scratch directory (with a `manifests/` folder) removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("autoregister-e2e-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("manifests")).unwrap();
        Scratch(dir)
    }
    pub fn manifests(&self) -> PathBuf {
        self.0.join("manifests")
    }
    pub fn write(&self, file: &str, text: &str) {
        // Write then rename so the controller never reads half a file.
        let tmp = self.0.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.manifests().join(file)).unwrap();
    }
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

/// The running binary, its stderr and stdout collected by threads.
pub struct Proc {
    pub child: Child,
    log: Arc<Mutex<String>>,
    /// Set once both pipes reached end of file.
    closed: Arc<std::sync::atomic::AtomicUsize>,
}

impl Proc {
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
        let closed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for stream in [
            Box::new(child.stderr.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().unwrap()),
        ] {
            let (log, closed) = (log.clone(), closed.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    log.lock().unwrap().push_str(&(line + "\n"));
                }
                closed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
        Proc { child, log, closed }
    }

    /// `run --manifests <scratch>/manifests --kubeconfig <for server>` plus `extra`.
    pub fn run(server: &TestServer, scratch: &Scratch, extra: &[&str]) -> Proc {
        let kc = scratch.kubeconfig(server);
        Self::run_with_kubeconfig(&kc, scratch, extra)
    }

    /// `run` against whatever `kubeconfig` names.
    pub fn run_with_kubeconfig(
        kubeconfig: &std::path::Path,
        scratch: &Scratch,
        extra: &[&str],
    ) -> Proc {
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

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn wait_log(&self, needle: &str) {
        assert!(
            wait_until(|| self.log().contains(needle)),
            "log never showed {needle:?}:\n{}",
            self.log()
        );
    }

    /// Sends `sig` (e.g. `TERM`, `STOP`, `CONT`) through kill(1).
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{sig}");
    }

    /// Polls for exit; `None` if still running after `timeout`.
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

    /// Waits (boundedly) until the reader threads saw both pipes close, so the log is whole.
    pub fn drain(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.closed.load(std::sync::atomic::Ordering::SeqCst) < 2 && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGTERM, then waits for a clean exit.
    pub fn terminate(self) -> (i32, String) {
        self.signal("TERM");
        self.wait_exit(Duration::from_secs(10))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` until it holds or [`WAIT`] passes; returns whether it held.
pub fn wait_until(f: impl FnMut() -> bool) -> bool {
    wait_until_for(WAIT, f)
}

/// Polls `f` until it holds or `timeout` passes; returns whether it held.
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

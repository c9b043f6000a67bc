//! Running the real `autoregister` binary in tests: scratch dirs, log capture, waits.
//!
//! Use from a test crate with `#[path = "support/binary.rs"] mod binary;`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Generous for a loaded 2-core machine; typical waits are milliseconds.
pub const WAIT: Duration = Duration::from_secs(20);

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh, empty directory named after the test.
    pub fn new(tag: &str) -> Scratch {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("autoregister-bin-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// `name` inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The running binary, its stdout and stderr collected by threads.
pub struct Proc {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Proc {
    /// Starts the binary with `args` and `RUST_LOG=rust_log`, without the caller's KUBECONFIG.
    pub fn spawn(args: &[&str], rust_log: &str) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_autoregister"))
            .args(args)
            .env("RUST_LOG", rust_log)
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

    /// Everything printed so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the log contains `needle`.
    pub fn wait_log(&self, needle: &str) {
        assert!(
            wait_until(|| self.log().contains(needle)),
            "log never showed {needle:?}:\n{}",
            self.log()
        );
    }

    /// The `host:port` of the operations endpoint, from its announcement.
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

    /// Waits for exit; returns the code and everything it printed.
    pub fn wait_exit(mut self, timeout: Duration) -> (i32, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader threads drain the pipes.
                std::thread::sleep(Duration::from_millis(50));
                return (status.code().unwrap_or(-1), self.log());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("did not exit within {timeout:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then waits for a clean exit.
    pub fn terminate(self) -> (i32, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.wait_exit(Duration::from_secs(10))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 20 ms until it holds or [`WAIT`] passes; returns its last answer.
pub fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
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
pub fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_autoregister"))
}

//! Runs a short-lived helper process (an exec credential plugin) within bounds: a deadline,
//! capped output, cancellation; on every way out the child is killed and reaped, never
//! left behind as an orphan.

use std::io::{self, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver};

/// How often a running child is checked (exit, deadline, cancellation).
const POLL: Duration = Duration::from_millis(5);

/// After the child exited, how long its pipes may stay open (held by a grandchild it left
/// running) before the whole process group is killed.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// Process ids (each its own process group's) of the children running now: a process that
/// exits at once (a second SIGTERM) kills them first, or they would outlive it in their own
/// group. An id leaves the list, under this lock, before its child is reaped, so a kill
/// never reaches a reused id.
static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Kills every child [`run`] has running now, with what each started.
pub(crate) fn kill_running() {
    let running = lock_running();
    for pid in running.iter() {
        kill_group(*pid);
    }
}

/// The limits of one run.
pub(crate) struct Bounds<'a> {
    /// The child is killed when it has not exited by then.
    pub(crate) until: Instant,
    /// Most bytes kept from stdout and from stderr each; more kills the child.
    pub(crate) max_output: usize,
    /// Checked while the child runs; `true` kills it (shutdown).
    pub(crate) cancelled: &'a dyn Fn() -> bool,
    /// Called once when the child has run this long.
    pub(crate) slow_after: Duration,
    /// What to do then (log that we wait for it).
    pub(crate) on_slow: &'a dyn Fn(),
}

/// Why a run gave no output.
#[derive(Debug)]
pub(crate) enum RunError {
    /// It could not be started.
    Spawn(io::Error),
    /// It ran past its deadline (and was killed) after this long.
    TimedOut(Duration),
    /// It was cancelled (and killed).
    Cancelled,
    /// It wrote more than the limit (and was killed).
    TooLarge(usize),
    /// Its state or output could not be read.
    Io(io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "cannot run: {e}"),
            RunError::TimedOut(d) => write!(f, "did not answer within {d:.1?}; killed"),
            RunError::Cancelled => write!(f, "cancelled (shutting down); killed"),
            RunError::TooLarge(n) => write!(f, "wrote more than {n} bytes; killed"),
            RunError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// What a finished child left.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

/// Runs `cmd` (stdin closed, stdout and stderr captured) within `bounds`.
pub(crate) fn run(cmd: &mut Command, bounds: &Bounds) -> Result<Output, RunError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so a kill also reaches what a plugin script started.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    let started = Instant::now();
    let mut child = {
        // Spawned under the lock: a `kill_running` meanwhile finds it listed.
        let mut running = lock_running();
        let child = cmd.spawn().map_err(RunError::Spawn)?;
        running.push(child.id());
        child
    };
    let mut pipes = Pipes::start(&mut child, bounds.max_output);
    let mut slow_told = false;
    let status = loop {
        match try_reap(&mut child) {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(kill(&mut child, RunError::Io(e))),
        }
        if let Some(n) = pipes.overflowed(bounds.max_output) {
            return Err(kill(&mut child, RunError::TooLarge(n)));
        }
        if (bounds.cancelled)() {
            return Err(kill(&mut child, RunError::Cancelled));
        }
        let now = Instant::now();
        if now >= bounds.until {
            return Err(kill(&mut child, RunError::TimedOut(started.elapsed())));
        }
        if !slow_told && now.saturating_duration_since(started) >= bounds.slow_after {
            slow_told = true;
            (bounds.on_slow)();
        }
        std::thread::sleep(POLL.min(bounds.until.saturating_duration_since(now)));
    };
    let (stdout, stderr) = match pipes.finish(PIPE_GRACE) {
        Some(out) => out,
        None => {
            kill_group(child.id());
            return Err(RunError::Io(io::Error::other(
                "exited, but something it started kept its output open; killed",
            )));
        }
    };
    if stdout.len() > bounds.max_output || stderr.len() > bounds.max_output {
        return Err(RunError::TooLarge(bounds.max_output));
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

fn lock_running() -> std::sync::MutexGuard<'static, Vec<u32>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// `try_wait`, taking the child off [`RUNNING`] when it has exited (and is reaped).
fn try_reap(child: &mut Child) -> std::io::Result<Option<ExitStatus>> {
    let mut running = lock_running();
    let status = child.try_wait();
    if !matches!(status, Ok(None)) {
        running.retain(|p| *p != child.id());
    }
    status
}

/// Kills the child and its process group and reaps it; returns `why` for the caller.
fn kill(child: &mut Child, why: RunError) -> RunError {
    kill_group(child.id());
    let _ = child.kill();
    lock_running().retain(|p| *p != child.id());
    let _ = child.wait();
    why
}

/// Kills every process of the group `pgid` (a plugin script and its own children). No
/// unsafe code in this crate, so through kill(1); without it only the child itself is killed.
fn kill_group(pgid: u32) {
    #[cfg(unix)]
    {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    #[cfg(not(unix))]
    let _ = pgid;
}

/// Threads reading stdout and stderr (both at once, or a chatty child blocks on a full pipe).
struct Pipes {
    rx: Receiver<(usize, io::Result<Vec<u8>>)>,
    got: [Option<Vec<u8>>; 2],
    done: usize,
    expected: usize,
}

impl Pipes {
    fn start(child: &mut Child, max: usize) -> Pipes {
        let (tx, rx) = bounded(2);
        let mut expected = 0;
        let streams: [Option<Box<dyn Read + Send>>; 2] = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ];
        for (i, stream) in streams.into_iter().enumerate() {
            let Some(stream) = stream else { continue };
            let tx = tx.clone();
            let spawned = std::thread::Builder::new()
                .name("exec-plugin-pipe".into())
                .spawn(move || {
                    let mut buf = Vec::new();
                    // One byte past the limit tells "too large" from "exactly the limit".
                    let r = stream
                        .take(max as u64 + 1)
                        .read_to_end(&mut buf)
                        .map(|_| buf);
                    let _ = tx.send((i, r));
                });
            if spawned.is_ok() {
                expected += 1;
            }
        }
        Pipes {
            rx,
            got: [None, None],
            done: 0,
            expected,
        }
    }

    fn take(&mut self, (i, r): (usize, io::Result<Vec<u8>>)) {
        self.done += 1;
        self.got[i] = Some(r.unwrap_or_default());
    }

    /// Collects finished readers; the limit when an output went past `max`.
    fn overflowed(&mut self, max: usize) -> Option<usize> {
        while let Ok(m) = self.rx.try_recv() {
            self.take(m);
        }
        // A reader stops one byte past the limit, so a longer buffer means "too large".
        self.got
            .iter()
            .flatten()
            .any(|b| b.len() > max)
            .then_some(max)
    }

    /// Both outputs, waiting at most `grace` for the pipes to close.
    fn finish(mut self, grace: Duration) -> Option<(Vec<u8>, Vec<u8>)> {
        let until = crate::runtime::clock::deadline_after(Instant::now(), grace);
        while self.done < self.expected {
            let left = until.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(m) => self.take(m),
                Err(_) => return None,
            }
        }
        let [out, err] = self.got;
        Some((out.unwrap_or_default(), err.unwrap_or_default()))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::sync::{RwLock, RwLockReadGuard};

    /// `kill_running` kills every child of the process: its test runs alone, the others
    /// side by side.
    static KILLS_ALL: RwLock<()> = RwLock::new(());

    fn side_by_side() -> RwLockReadGuard<'static, ()> {
        KILLS_ALL.read().unwrap_or_else(|e| e.into_inner())
    }

    fn bounds<'a>(until: Instant, max: usize, cancelled: &'a dyn Fn() -> bool) -> Bounds<'a> {
        Bounds {
            until,
            max_output: max,
            cancelled,
            slow_after: Duration::from_secs(3600),
            on_slow: &|| {},
        }
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(20)
    }

    #[test]
    fn output_and_status_come_back() {
        let _g = side_by_side();
        let out = run(
            &mut sh("echo out; echo err >&2; exit 3"),
            &bounds(far(), 100, &|| false),
        )
        .unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn a_child_past_its_deadline_is_killed() {
        let _g = side_by_side();
        let t = Instant::now();
        let until = t + Duration::from_millis(100);
        let e = run(&mut sh("sleep 30"), &bounds(until, 100, &|| false)).unwrap_err();
        assert!(matches!(e, RunError::TimedOut(_)), "{e}");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }

    #[test]
    fn too_much_output_kills_the_child() {
        let _g = side_by_side();
        let e = run(&mut sh("yes"), &bounds(far(), 1000, &|| false)).unwrap_err();
        assert!(matches!(e, RunError::TooLarge(1000)), "{e}");
    }

    #[test]
    fn kill_running_ends_a_running_child_with_what_it_started() {
        let _alone = KILLS_ALL.write().unwrap_or_else(|e| e.into_inner());
        // Not the last command: `sh` forks `sleep`, a grandchild holding the pipes.
        let runner = std::thread::spawn(|| {
            run(
                &mut sh("sleep 30; echo never"),
                &bounds(far(), 100, &|| false),
            )
        });
        let t = Instant::now();
        while lock_running().is_empty() {
            assert!(t.elapsed() < Duration::from_secs(10), "never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        kill_running();
        // A grandchild left alive would hold the pipes open: an error after the grace.
        let out = runner.join().unwrap().unwrap();
        assert!(!out.status.success(), "{:?}", out.status);
        assert!(out.stdout.is_empty());
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(lock_running().is_empty(), "taken off the list when reaped");
    }

    #[test]
    fn cancellation_kills_the_child() {
        let _g = side_by_side();
        let t = Instant::now();
        let e = run(
            &mut sh("sleep 30"),
            &bounds(far(), 100, &|| t.elapsed() > Duration::from_millis(50)),
        )
        .unwrap_err();
        assert!(matches!(e, RunError::Cancelled), "{e}");
    }
}

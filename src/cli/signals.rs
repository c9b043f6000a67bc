//! SIGTERM/SIGINT for `run` and `plan` from their first instant, with no async runtime: a
//! flag set in the handler itself, hooks run on a signal thread, and a channel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::exit;

/// How long a command stopping on its own flag waits for the signal thread's line (the
/// thread may wait for a core on a loaded machine; it was seen to run 60-170 ms late).
const ANNOUNCE_WAIT: Duration = Duration::from_secs(1);

/// The stop signals of this process, installed by [`install`] before anything else.
pub struct Stop {
    /// Set by the signal handler itself the moment SIGTERM/SIGINT arrives: write gates read
    /// it, so no write leaves after the signal even while the signal thread waits for a core.
    flag: Arc<AtomicBool>,
    /// Receives the first signal, after the hooks ran and the line was logged.
    rx: Receiver<i32>,
    hooks: Arc<Mutex<Hooks>>,
}

/// What the signal thread runs on the first signal, and whether it has.
#[derive(Default)]
struct Hooks {
    fired: bool,
    run: Vec<Box<dyn Fn() + Send>>,
}

/// Installs the SIGTERM/SIGINT handlers and starts the signal thread. The first signal sets
/// the flag, runs the hooks (see [`Stop::on_signal`]), logs one line and is sent to the
/// channel; a second one kills any exec credential plugin still running and exits the
/// process at once with status 1 (an operator who asks twice does not want to wait for a
/// clean stop). Two signals arriving together count as two.
pub fn install() -> std::io::Result<Stop> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [SIGTERM, SIGINT] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    let mut signals = Signals::new([SIGTERM, SIGINT])?;
    let hooks = Arc::new(Mutex::new(Hooks::default()));
    let (tx, rx) = crossbeam_channel::bounded(1);
    {
        let hooks = hooks.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || watch(&mut signals, &hooks, &tx))?;
    }
    // Tests wait for this line to know a signal is handled from now on.
    log::debug!("signal handlers installed");
    Ok(Stop { flag, rx, hooks })
}

/// The signal thread: the first signal stops, a second one (in the same batch or later) exits.
fn watch(signals: &mut Signals, hooks: &Mutex<Hooks>, tx: &Sender<i32>) {
    let mut seen = false;
    loop {
        let batch: Vec<i32> = signals.wait().collect();
        let Some(&first) = batch.first() else {
            continue;
        };
        if seen || batch.len() > 1 {
            second(*batch.last().unwrap_or(&first));
        }
        seen = true;
        // Stop first, log after: nothing may be sent while the line is written.
        let mut h = hooks.lock();
        h.fired = true;
        for hook in &h.run {
            hook();
        }
        drop(h);
        log::info!(
            "signal {} received, stopping (a second one exits at once)",
            name(first)
        );
        let _ = tx.send(first);
    }
}

fn second(sig: i32) -> ! {
    // A plugin runs in its own process group: it would outlive this process.
    autoregister::client::kill_running_plugins();
    log::error!("second signal ({}): exiting at once", name(sig));
    std::process::exit(exit::FAILED)
}

impl Stop {
    /// Whether SIGTERM/SIGINT has arrived (set in the handler: true at once, before the
    /// signal thread has run).
    pub fn signalled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The flag the handler sets, for write gates on other threads.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// Runs `hook` on the signal thread when the first signal arrives, before its line is
    /// logged, or now when it has arrived already. A hook must not block: a second signal
    /// waits for it.
    pub fn on_signal(&self, hook: impl Fn() + Send + 'static) {
        let mut h = self.hooks.lock();
        if h.fired {
            drop(h);
            hook();
        } else {
            h.run.push(Box::new(hook));
        }
    }

    /// The first signal, once its hooks ran and its line was logged.
    pub fn channel(&self) -> &Receiver<i32> {
        &self.rx
    }

    /// For a command ending early on [`signalled`](Self::signalled): waits (briefly) until
    /// the signal thread has logged its line, so it comes before the command's last words.
    pub fn wait_announced(&self) {
        let _ = self.rx.recv_timeout(ANNOUNCE_WAIT);
    }
}

fn name(sig: i32) -> &'static str {
    match sig {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        _ => "?",
    }
}

//! SIGTERM/SIGINT delivered to a channel, with no async runtime.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crossbeam_channel::Receiver;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::exit;

/// A flag set by the signal handler itself the moment SIGTERM/SIGINT arrives: the write
/// gate reads it, so no write leaves after the signal even while the signal thread waits
/// for a core on a loaded machine (it was seen to run 60-170 ms late).
pub fn stop_flag() -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [SIGTERM, SIGINT] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(flag)
}

/// A channel that receives the first SIGTERM/SIGINT. `on_first` runs on the signal thread
/// before the message is sent, so the controller stops writing at once, whatever the main
/// thread is busy with. A second signal exits the process at once with status 1 (an
/// operator who asks twice does not want to wait for a clean stop).
pub fn stop_channel(on_first: impl Fn() + Send + 'static) -> std::io::Result<Receiver<i32>> {
    let mut signals = Signals::new([SIGTERM, SIGINT])?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut seen = false;
            for sig in signals.forever() {
                if seen {
                    log::error!("second signal ({}): exiting at once", name(sig));
                    std::process::exit(exit::FAILED);
                }
                seen = true;
                // Stop first, log after: nothing may be sent while the line is written.
                on_first();
                log::info!(
                    "signal {} received, stopping (a second one exits at once)",
                    name(sig)
                );
                let _ = tx.send(sig);
            }
        })?;
    Ok(rx)
}

fn name(sig: i32) -> &'static str {
    match sig {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        _ => "?",
    }
}

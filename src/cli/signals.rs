//! SIGTERM/SIGINT delivered to a channel, with no async runtime.

use crossbeam_channel::Receiver;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// A channel that receives one message per SIGTERM/SIGINT.
pub fn stop_channel() -> std::io::Result<Receiver<i32>> {
    let mut signals = Signals::new([SIGTERM, SIGINT])?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if tx.send(sig).is_err() {
                    break;
                }
            }
        })?;
    Ok(rx)
}

//! A closed stdout ends the process as it ends a coreutils program.
//!
//! Rust ignores SIGPIPE (so a write to a closed socket is an error, not death), and
//! `println!` then panics on a closed stdout: `autoregister plan | head -2` aborted with
//! "failed printing to stdout: Broken pipe". Coreutils keep SIGPIPE's default action and
//! die of it, quietly (a shell reports status 141), and a pipeline's reader expects that.
//! Restoring the default for the whole process would let a dropped API server connection
//! kill the controller, so only stdout's broken pipe is turned into that death.

use std::io::{ErrorKind, Write};

/// std's panic message for a failed `print!`/`println!` to stdout.
const PRINT_FAILED: &str = "failed printing to stdout";

/// Installs the hook that turns `println!`'s broken-pipe panic into death by SIGPIPE.
pub fn die_quietly_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        let broken_pipe = std::io::Error::from(ErrorKind::BrokenPipe).to_string();
        let epipe = std::io::Error::from_raw_os_error(32).to_string();
        if msg.starts_with(PRINT_FAILED) && (msg.contains(&epipe) || msg.ends_with(&broken_pipe)) {
            sigpipe();
        }
        default(info);
    }));
}

/// Writes `text` and a newline to stdout; a closed stdout ends the process by SIGPIPE.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
        write_failed(&e);
    }
}

/// Ends the process after a failed write to stdout: by SIGPIPE when it was closed, else
/// (a full disk) with status 1, as nothing useful can be said on stdout.
pub fn write_failed(e: &std::io::Error) -> ! {
    if e.kind() == ErrorKind::BrokenPipe {
        sigpipe();
    }
    eprintln!("autoregister: cannot write to stdout: {e}");
    std::process::exit(super::exit::FAILED);
}

/// Dies of SIGPIPE with its default action, as a coreutils program on a closed pipe.
fn sigpipe() -> ! {
    let _ = signal_hook::low_level::emulate_default_handler(signal_hook::consts::SIGPIPE);
    // Not reached: the default action of SIGPIPE ends the process.
    std::process::exit(128 + signal_hook::consts::SIGPIPE)
}

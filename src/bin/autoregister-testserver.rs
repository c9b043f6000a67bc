//! The test API server as a process, for the demo and for tools outside the repo.
//!
//! ```text
//! autoregister-testserver [--addr 127.0.0.1:PORT] [--kubeconfig-out FILE] [--tls-dir DIR]
//!                         [--client-ca FILE] [--token TOKEN] [--history N] [--no-flow-control]
//!                         [--kube-apiserver [--crd-group GROUP/VERSION]...] [--seat-limit K]
//! ```
//!
//! Prints its URL as the first line of stdout once it accepts connections and serves until
//! SIGTERM/SIGINT. Faults, the request log and seeding are under `/_testserver/`.
//! `--no-flow-control` leaves out the API Priority and Fairness headers (an old or proxied
//! API server).
//! `--kube-apiserver` plays kube-apiserver: built-in APIServices and its own autoregister
//! rules for the kube-aggregator label; `--crd-group` adds a CRD group it keeps registered.
//! `--seat-limit K` serves at most K API requests at once (watches aside) and answers the
//! rest `429` with `Retry-After`, as API Priority and Fairness does for a saturated level.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use autoregister::testserver::TestServer;

const USAGE: &str = "\
usage: autoregister-testserver [--addr HOST:PORT] [--kubeconfig-out FILE] [--tls-dir DIR]
                               [--client-ca FILE] [--token TOKEN] [--history N]
                               [--no-flow-control] [--kube-apiserver [--crd-group GROUP/VERSION]...]
                               [--seat-limit K]";

/// The whole `--help`: what it is, every flag with its default, what it prints.
const HELP: &str = "\
autoregister-testserver: an in-process Kubernetes API server (APIServices, Leases, Events,
Services, ...) for tests, demos and tools; not for production.

flags:
  --addr HOST:PORT         where to listen (default 127.0.0.1:0, a free port)
  --kubeconfig-out FILE    write a kubeconfig for it there (default: none)
  --tls-dir DIR            serve HTTPS, writing the CA to DIR/ca.crt (default: plain HTTP)
  --client-ca FILE         serve HTTPS and require client certificates signed by this CA
  --token TOKEN            require this bearer token (default: no authentication)
  --history N              watch events kept for resuming watches (default 1000)
  --no-flow-control        leave out the API Priority and Fairness headers (an old or
                           proxied API server)
  --kube-apiserver         play kube-apiserver: built-in APIServices and its own
                           autoregister rules for the kube-aggregator label
  --crd-group GROUP/VERSION  with --kube-apiserver, a CRD group it keeps registered
                           (repeatable)
  --seat-limit K           answer 429 with Retry-After beyond K requests in flight, as
                           API Priority and Fairness does (default: no limit)
  -h, --help               this text

Prints its URL as the first line of stdout once it accepts connections, then serves until
SIGTERM/SIGINT. Faults, the request log and seeding are under /_testserver/.
Exit codes: 0 stopped by a signal, 1 cannot serve, 2 bad usage.";

struct Args {
    addr: String,
    kubeconfig_out: Option<PathBuf>,
    tls_dir: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    token: Option<String>,
    history: Option<usize>,
    flow_control: bool,
    kube_apiserver: bool,
    crd_groups: Vec<(String, String)>,
    seat_limit: usize,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args {
        addr: "127.0.0.1:0".into(),
        kubeconfig_out: None,
        tls_dir: None,
        client_ca: None,
        token: None,
        history: None,
        flow_control: true,
        kube_apiserver: false,
        crd_groups: Vec::new(),
        seat_limit: 0,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("addr") => args.addr = parser.value()?.string()?,
            Long("kubeconfig-out") => args.kubeconfig_out = Some(parser.value()?.into()),
            Long("tls-dir") => args.tls_dir = Some(parser.value()?.into()),
            Long("client-ca") => args.client_ca = Some(parser.value()?.into()),
            Long("token") => args.token = Some(parser.value()?.string()?),
            Long("history") => args.history = Some(parser.value()?.parse()?),
            Long("no-flow-control") => args.flow_control = false,
            Long("seat-limit") => args.seat_limit = parser.value()?.parse()?,
            Long("kube-apiserver") => args.kube_apiserver = true,
            Long("crd-group") => {
                let gv = parser.value()?.string()?;
                match gv.split_once('/') {
                    Some((g, v)) if !g.is_empty() && !v.is_empty() && !v.contains('/') => {
                        args.crd_groups.push((g.to_string(), v.to_string()))
                    }
                    _ => return Err(format!("--crd-group wants GROUP/VERSION, got {gv:?}").into()),
                }
            }
            Long("help") | Short('h') => {
                // A closed stdout (`--help | head -1`) is no error worth a panic.
                let _ = writeln!(std::io::stdout(), "{USAGE}\n\n{HELP}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if !args.crd_groups.is_empty() && !args.kube_apiserver {
        return Err("--crd-group needs --kube-apiserver".into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("autoregister-testserver: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Register the signals before serving so an early SIGTERM is not lost.
    let mut signals = match signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("autoregister-testserver: cannot handle signals: {e}");
            return ExitCode::from(1);
        }
    };
    let mut builder = TestServer::builder()
        .addr(args.addr.clone())
        .tls(args.tls_dir.is_some())
        .flow_control(args.flow_control)
        .seat_limit(args.seat_limit);

    if let Some(path) = &args.client_ca {
        match std::fs::read(path) {
            Ok(pem) => builder = builder.client_ca(pem),
            Err(e) => {
                eprintln!(
                    "autoregister-testserver: cannot read --client-ca {}: {e}",
                    path.display()
                );
                return ExitCode::from(2);
            }
        }
    }
    if let Some(t) = &args.token {
        builder = builder.token(t.clone());
    }
    if let Some(h) = args.history {
        builder = builder.history(h);
    }
    builder = builder.kube_apiserver(args.kube_apiserver);
    for (g, v) in &args.crd_groups {
        builder = builder.kube_apiserver_crd_group(g.clone(), v.clone());
    }
    let server = match builder.start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "autoregister-testserver: cannot serve on {}: {e}",
                args.addr
            );
            return ExitCode::from(1);
        }
    };
    if let (Some(dir), Some(ca)) = (&args.tls_dir, server.ca_pem()) {
        let path = dir.join("ca.crt");
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, ca)) {
            eprintln!(
                "autoregister-testserver: cannot write {}: {e}",
                path.display()
            );
            return ExitCode::from(1);
        }
    }
    if let Some(path) = &args.kubeconfig_out {
        if let Err(e) = server.write_kubeconfig(path) {
            eprintln!(
                "autoregister-testserver: cannot write {}: {e}",
                path.display()
            );
            return ExitCode::from(1);
        }
    }
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", server.url());
    let _ = out.flush();
    if let Some(sig) = signals.forever().next() {
        eprintln!("autoregister-testserver: signal {sig}, stopping");
    }
    server.shutdown();
    ExitCode::SUCCESS
}

//! Command-line parsing (lexopt): `run`, `plan`, `version`, `help`, and their help texts.

use std::path::PathBuf;
use std::time::Duration;

use autoregister::api::{
    is_reserved_label_key, validate_label_key, AUTO_MANAGED_LABEL, DEFAULT_LABEL_KEY,
};
use autoregister::client::{DEFAULT_BURST, DEFAULT_QPS};
use autoregister::controller::Ownership;
use autoregister::runtime::leader::LeaderConfig;
use autoregister::text;

use super::duration;

/// Usage text printed for `--help` and after usage errors.
pub const USAGE: &str = "\
usage:
  autoregister run  --manifests PATH [--once [--wait-available]] [--timeout DUR] [--workers N]
                    [--kubeconfig FILE] [--context NAME] [--server URL] [--as USER] [--as-group G]
                    [--qps F] [--burst N] [--resync DUR] [--relist DUR] [--health-addr ADDR]
                    [--leader-elect] [--lease-namespace NS] [--lease-name NAME]
                    [--leader-elect-lease-duration DUR] [--leader-elect-renew-deadline DUR]
                    [--leader-elect-retry-period DUR]
                    [--label-key KEY] [--adopt] [--allow-empty] [--withdraw-unavailable DUR]
                    [--events[=BOOL]] [--ca-expiry-warning DUR] [--fight-backoff-max DUR]
                    [--log-format text|json]
  autoregister plan --manifests PATH [--kubeconfig FILE] [--context NAME] [--server URL]
                    [--as USER] [--as-group G] [--as-uid UID]
                    [--label-key KEY] [--adopt] [--allow-empty] [--timeout DUR]
                    [--all] [-o text|json] [--dry-run=server|none] [--log-format text|json]
  autoregister explain [NAME...] [--all] [-o text|json] [--kubeconfig FILE] [--context NAME]
                    [--server URL] [--as USER] [--as-group G] [--timeout DUR]
  autoregister version | --version | -V
  autoregister help [COMMAND]

PATH is a file or a directory of *.yaml, *.yml, *.json APIService manifests.
Durations: 500ms, 30s, 2m, 1h.
Exit codes: 0 ok, 1 did not converge / runtime failure, 2 bad usage, manifest or kubeconfig.";

/// The flags `run` and `plan` share, with their ranges and defaults.
pub const FLAGS: &str = "  --manifests PATH         required; a file or a directory (not recursive)
  --kubeconfig FILE        default: $KUBECONFIG, else ~/.kube/config, else in-cluster
  --context NAME           default: the kubeconfig's current-context
  --server URL             overrides the kubeconfig's server (default: the kubeconfig's);
                           a bare HOST:PORT gets https:// when TLS is configured, else
                           http://, as with kubectl
  --as USER                act as USER (impersonation; default: the kubeconfig user's
                           `as`, else none)
  --as-group GROUP         act with GROUP too, repeatable; needs --as (default: the
                           user's `as-groups`)
  --as-uid UID             act with UID; needs --as (default: the user's `as-uid`)
  --qps F                  client-side requests/s, >= 0; 0 = off (default: none against a
                           server with API Priority and Fairness, else 50)
  --burst N                client-side burst, >= 1 (default 100)
  --label-key KEY          the ownership label (default autoregister.dev/automanaged); one
                           instance or leader-elected group per key
  --adopt                  take over desired APIServices that carry no ownership label
                           (default: off)
  --allow-empty            let an empty PATH deregister every APIService we manage
                           (default: off)
  --timeout DUR            run --once: give up converging after it (default 60s);
                           plan: give up after it (default 30s)
  --log-format FORMAT      text or json: one JSON object per line (default text)";

/// The flags of `run` alone, with their ranges and defaults.
pub const RUN_FLAGS: &str =
    "  --once                   converge once and exit 0, or exit 1 after --timeout (default: off)
  --wait-available         with --once: also wait (within --timeout) until every desired
                           APIService backed by a service is Available (default: off)
  --withdraw-unavailable DUR
                           delete an APIService of ours unavailable for DUR and register it
                           again when its Service has a ready endpoint (default: off; the
                           annotation autoregister.dev/withdraw-unavailable-after: DUR|never
                           sets it per object)
  --workers N              worker threads, 1..=256 (default 2)
  --resync DUR             re-deliver every cached object this often, >= 1s; 0 = never (default)
  --relist DUR             list everything from the server again this often (default 10m;
                           0 = never): catches changes a watch missed, e.g. a restored server
  --health-addr ADDR       serve /livez, /healthz, /readyz, /metrics on HOST:PORT or :PORT
                           (default: off)
  --leader-elect           run only while holding the Lease (default: off)
  --lease-namespace NS     default kube-system
  --lease-name NAME        default autoregister
  --leader-elect-lease-duration DUR   default 15s; > renew deadline
  --leader-elect-renew-deadline DUR   default 10s; > 1.2 x retry period
  --leader-elect-retry-period DUR     default 2s
  --events[=BOOL]          record Kubernetes Events on the APIServices (default true)
  --ca-expiry-warning DUR  warn (log and Warning Event) when an APIService's CA bundle
                           expires within DUR (default 336h, 14 days)
  --fight-backoff-max DUR  while another writer keeps undoing a write, put it back at most
                           this far apart, 5ms..=1000s (default 30s); the pace starts over
                           once nobody has undone it for twice this long";

/// The flags only `plan` takes.
pub const PLAN_FLAGS: &str =
    "  --all                    list every APIService, also those not ours (default: one line
                           counting them)
  -o, --output FORMAT      text or json (default text)
  --dry-run MODE           server: send each planned write with dryRun=All and report what
                           the server refuses; none: no requests but the list (for read-only
                           credentials) (default server)";

/// The flags only `explain` takes.
pub const EXPLAIN_FLAGS: &str =
    "  --all                    every APIService, served or not (default: those not Available=True)
  -o, --output FORMAT      text or json: one object per APIService (default text)
  --timeout DUR            give up on each request after it (default 30s)";

/// [`FLAGS`] without those `explain` does not take (it reads no manifests and owns
/// nothing; its `--timeout` is its own).
fn explain_connection_flags() -> String {
    let skip = [
        "--manifests",
        "--label-key",
        "--adopt",
        "--allow-empty",
        "--timeout",
    ];
    let mut keep = true;
    let mut out = Vec::new();
    for line in FLAGS.lines() {
        if let Some(flag) = line
            .trim_start()
            .strip_prefix("--")
            .filter(|_| line.starts_with("  --"))
        {
            let name = format!("--{}", flag.split_whitespace().next().unwrap_or(""));
            keep = !skip.contains(&name.as_str());
        }
        if keep {
            out.push(line);
        }
    }
    out.join("\n")
}

/// What every command's help ends with: flag forms, environment, exit codes.
const HELP_FOOTER: &str = "\
Every flag takes its value as --flag VALUE or --flag=VALUE; a boolean flag alone means
true, or takes true/false (--events false, --adopt=true).
PATH is a file or a directory of *.yaml, *.yml, *.json APIService manifests.
Durations: 500ms, 30s, 2m, 1h.

environment:
  RUST_LOG     what to log to stderr (default info): error, warn, info, debug, trace, or
               per module, e.g. autoregister=debug,ureq=info; an invalid value is warned about
  KUBECONFIG   kubeconfig files (colon-separated, merged) when --kubeconfig is not given

exit codes:
  0  ok: converged (--once), planned (plan), or stopped by SIGTERM/SIGINT (without --once)
  1  did not converge (--once: by --timeout, or a signal came first), a plan stopped by
     a signal, leadership lost, a second signal, or a runtime failure
  2  bad usage, a bad manifest or a bad kubeconfig (the message names the file)";

/// One line per command, for `autoregister --help`.
const COMMANDS: &str = "\
commands:
  run       keep the APIServices of --manifests registered (--once: converge and exit)
  plan      print what `run` would do to each APIService, writing nothing
  explain   say why APIServices are not served: the broken link, its evidence, the fix
  version   print the version, git commit and build target
  help      print a command's help: autoregister help [COMMAND]";

/// The help text of `topic` (`None`: the whole program), or an error for an unknown one.
pub fn help(topic: Option<&str>) -> Result<String, String> {
    Ok(match topic {
        None => format!(
            "autoregister: keeps a declared set of Kubernetes APIService objects registered.\n\n\
             {USAGE}\n\n{COMMANDS}\n\n\
             `autoregister COMMAND --help` lists a command's flags with their defaults.\n\n\
             {HELP_FOOTER}"
        ),
        Some("run") => format!(
            "autoregister run: keeps the APIServices of --manifests registered, re-reading it when\n\
             it changes; with --once, converges once and exits.\n\n\
             usage:\n  autoregister run --manifests PATH [flags]\n\n\
             flags:\n{FLAGS}\n{RUN_FLAGS}\n\n{HELP_FOOTER}"
        ),
        Some("plan") => format!(
            "autoregister plan: prints, for every APIService involved, its table cell and what\n\
             `run` would do; writes nothing.\n\n\
             usage:\n  autoregister plan --manifests PATH [flags]\n\n\
             flags:\n{FLAGS}\n{PLAN_FLAGS}\n\n{HELP_FOOTER}"
        ),
        Some("explain") => format!(
            "autoregister explain: says why an aggregated API is not served. For each APIService it\n\
             walks the chain kube-aggregator walks (Service, port, endpoints and pods, caBundle and\n\
             the serving certificate, the backend's permissions, the discovery GET), stops at the\n\
             first broken link and prints the cause code, the evidence it read, the fix and what\n\
             else breaks meanwhile. Reads only; a link the user may not read is reported as such.\n\n\
             usage:\n  autoregister explain [NAME...] [flags]\n  kubectl autoregister explain [NAME...] [flags]   (installed as kubectl-autoregister)\n\n\
             With no NAME: every APIService that is not Available=True.\n\n\
             flags:\n{}\n{EXPLAIN_FLAGS}\n\n\
             exit codes:\n  0  every APIService examined is served\n  1  one is not\n  2  bad usage or a connection error",
            explain_connection_flags()
        ),
        Some("version") => "autoregister version: prints the version, the git commit and the \
                            build target.\n\nusage:\n  autoregister version | --version | -V"
            .to_string(),
        Some("help") => "autoregister help: prints the help of a command, or of the program.\n\n\
                         usage:\n  autoregister help [COMMAND]"
            .to_string(),
        Some(other) => return Err(format!("unknown command {other:?}")),
    })
}

/// A parsed command line.
#[derive(Debug)]
pub enum Command {
    /// Keep the manifests' APIServices registered (the arguments boxed, as they are many
    /// times the size of the small variants').
    Run(Box<RunArgs>),
    /// Print what `run` would do.
    Plan(Box<PlanArgs>),
    /// Say why APIServices are (not) served.
    Explain(Box<ExplainArgs>),
    /// Print the version.
    Version,
    /// Print the help of a command (`None`: of the program).
    Help(Option<String>),
}

/// How to reach the API server.
#[derive(Debug, Default)]
pub struct KubeArgs {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `--server`.
    pub server: Option<String>,
    /// `--as`: the user to impersonate.
    pub as_user: Option<String>,
    /// `--as-uid`: the uid to impersonate.
    pub as_uid: Option<String>,
    /// `--as-group`, repeatable: the groups to impersonate.
    pub as_groups: Vec<String>,
    /// `--qps` (0 = off).
    pub qps: Option<f32>,
    /// `--burst`.
    pub burst: Option<u32>,
}

/// Which objects are ours: `--label-key`, `--adopt`, `--allow-empty`.
#[derive(Debug)]
pub struct OwnershipArgs {
    /// `--label-key` (default [`DEFAULT_LABEL_KEY`]).
    pub label_key: String,
    /// `--adopt`.
    pub adopt: bool,
    /// `--allow-empty`.
    pub allow_empty: bool,
}

impl Default for OwnershipArgs {
    fn default() -> Self {
        OwnershipArgs {
            label_key: DEFAULT_LABEL_KEY.to_string(),
            adopt: false,
            allow_empty: false,
        }
    }
}

impl OwnershipArgs {
    /// The ownership policy these flags describe.
    pub fn ownership(&self) -> Ownership {
        Ownership {
            label_key: self.label_key.clone(),
            adopt: self.adopt,
            allow_empty: self.allow_empty,
            // `run` and `plan` write as the program the User-Agent names (`Controller::new`).
            field_manager: autoregister::controller::decision::DEFAULT_FIELD_MANAGER.to_string(),
        }
    }

    /// The warning to print when the key is kube-apiserver's own.
    pub fn upstream_key_warning(&self) -> Option<String> {
        (self.label_key == AUTO_MANAGED_LABEL).then(|| {
            format!(
                "--label-key {AUTO_MANAGED_LABEL} is kube-apiserver's own label: on a real cluster \
                 its built-in APIServices (v1., v1.apps, ...) then count as ours and may be \
                 deleted, and kube-apiserver deletes what we create. Use it only if this program \
                 is the cluster's aggregator"
            )
        })
    }
}

/// Arguments of `run`.
#[derive(Debug)]
pub struct RunArgs {
    /// `--manifests`.
    pub manifests: PathBuf,
    /// `--once`.
    pub once: bool,
    /// `--wait-available` (with `--once`): also wait until every desired APIService backed by
    /// a service is `Available`.
    pub wait_available: bool,
    /// `--withdraw-unavailable DUR`: withdraw an APIService of ours unavailable this long.
    pub withdraw_unavailable: Option<Duration>,
    /// `--timeout` (for `--once`).
    pub timeout: Duration,
    /// `--workers`.
    pub workers: usize,
    /// `--resync`.
    pub resync: Option<Duration>,
    /// `--relist` (default 10 min; `0` never).
    pub relist: Option<Duration>,
    /// `--health-addr`: where to serve /healthz, /readyz and /metrics.
    pub health_addr: Option<String>,
    /// `--leader-elect`: run only while holding the Lease.
    pub leader_elect: bool,
    /// `--lease-namespace` (default `kube-system`).
    pub lease_namespace: String,
    /// `--lease-name` (default `autoregister`).
    pub lease_name: String,
    /// `--events` (default true): record Kubernetes Events for writes and refusals.
    pub events: bool,
    /// `--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
    /// `--leader-elect-retry-period` (kube-controller-manager's flags and defaults).
    pub leader: LeaderConfig,
    /// `--ca-expiry-warning` (default 14 days).
    pub ca_expiry_warning: Duration,
    /// `--fight-backoff-max` (default 30 s): the longest a put-back waits in a fight.
    pub fight_backoff_max: Duration,
    /// Ownership flags.
    pub ownership: OwnershipArgs,
    /// Connection flags.
    pub kube: KubeArgs,
    /// `--log-format`.
    pub log_format: LogFormat,
}

/// `plan -o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A table for people.
    Text,
    /// One JSON document for pipelines.
    Json,
}

/// Arguments of `explain`.
#[derive(Debug)]
pub struct ExplainArgs {
    /// The APIServices named (none: every one not `Available=True`).
    pub names: Vec<String>,
    /// `--all`: every APIService, served or not.
    pub all: bool,
    /// `-o`.
    pub output: Output,
    /// `--timeout`: bounds each request.
    pub timeout: Duration,
    /// Connection flags.
    pub kube: KubeArgs,
    /// `--log-format`.
    pub log_format: LogFormat,
}

/// Arguments of `plan`.
#[derive(Debug)]
pub struct PlanArgs {
    /// `--all`: list APIServices that are not ours too.
    pub all: bool,
    /// `-o`.
    pub output: Output,
    /// `--dry-run=server` (true) or `none`.
    pub dry_run: bool,
    /// `--manifests`.
    pub manifests: PathBuf,
    /// `--timeout`: the whole plan (every request it makes) gives up after this.
    pub timeout: Duration,
    /// Ownership flags.
    pub ownership: OwnershipArgs,
    /// Connection flags.
    pub kube: KubeArgs,
    /// `--log-format`.
    pub log_format: LogFormat,
}

/// `--log-format`: how log lines are written to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `TIME LEVEL message`, for people.
    #[default]
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

impl LogFormat {
    fn parse(v: &str) -> Result<LogFormat, String> {
        match v {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("--log-format takes text or json, got {v:?}")),
        }
    }
}

/// `help [COMMAND]`: the command named must exist.
fn help_command(parser: &mut lexopt::Parser) -> Result<Command, String> {
    use lexopt::prelude::*;
    let topic = match parser.next().map_err(|e| e.to_string())? {
        None => None,
        Some(Value(v)) => Some(v.string().map_err(|e| e.to_string())?),
        Some(other) => return Err(other.unexpected().to_string()),
    };
    if let Some(extra) = parser.next().map_err(|e| e.to_string())? {
        return Err(extra.unexpected().to_string());
    }
    help(topic.as_deref())?;
    Ok(Command::Help(topic))
}

/// Parses `args` (without the program name).
pub fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Command, String> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let sub = match parser.next().map_err(|e| e.to_string())? {
        Some(Value(v)) => v.string().map_err(|e| e.to_string())?,
        Some(Long("help") | Short('h')) | None => return Ok(Command::Help(None)),
        Some(Long("version") | Short('V')) => return Ok(Command::Version),
        Some(other) => return Err(other.unexpected().to_string()),
    };
    if sub == "help" {
        return help_command(&mut parser);
    }
    if !matches!(sub.as_str(), "run" | "plan" | "explain" | "version") {
        return Err(format!("unknown command {sub:?}"));
    }
    let mut manifests = None;
    let mut once = false;
    let mut wait_available = false;
    let mut withdraw_unavailable = None;
    // `run --once` converges within 60 s; `plan` only lists, 30 s is plenty.
    let mut timeout = Duration::from_secs(if sub == "run" { 60 } else { 30 });
    let mut leader = LeaderConfig::default();
    let mut workers = 2usize;
    let mut resync = None;
    let mut ca_expiry_warning = autoregister::controller::ca::DEFAULT_EXPIRY_WARNING;
    let mut fight_backoff_max = autoregister::controller::DEFAULT_FIGHT_BACKOFF_MAX;
    let mut relist = Some(autoregister::runtime::reflector::DEFAULT_RELIST);
    let mut health_addr = None;
    let mut leader_elect = false;
    let mut lease_namespace = "kube-system".to_string();
    let mut lease_name = "autoregister".to_string();
    let mut events = true;
    let (mut all, mut output, mut dry_run) = (false, Output::Text, true);
    let mut log_format = LogFormat::Text;
    let mut kube = KubeArgs::default();
    let mut ownership = OwnershipArgs::default();
    let mut names = Vec::new();
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        let plan_only = |name: &str| {
            if sub == "plan" {
                Ok(())
            } else {
                Err(format!("--{name} is only valid for `plan`"))
            }
        };
        let listing = |name: &str| {
            if sub == "plan" || sub == "explain" {
                Ok(())
            } else {
                Err(format!("--{name} is only valid for `plan` and `explain`"))
            }
        };
        // `explain` reads the cluster only: the manifest and ownership flags mean nothing.
        let not_explain = |name: &str| {
            if sub == "explain" {
                Err(format!("--{name} is not valid for `explain`"))
            } else {
                Ok(())
            }
        };
        let run_only = |name: &str| {
            if sub == "run" {
                Ok(())
            } else {
                Err(format!("--{name} is only valid for `run`"))
            }
        };
        match arg {
            Short('h') | Long("help") => return Ok(Command::Help(Some(sub))),
            Value(v) if sub == "explain" => names.push(v.string().map_err(|e| e.to_string())?),
            Long("manifests") if sub != "version" => {
                not_explain("manifests")?;
                manifests = Some(PathBuf::from(value(&mut parser)?))
            }
            Long("kubeconfig") if sub != "version" => {
                kube.kubeconfig = Some(PathBuf::from(value(&mut parser)?))
            }
            Long("context") if sub != "version" => kube.context = Some(value(&mut parser)?),
            Long("server") if sub != "version" => kube.server = Some(value(&mut parser)?),
            Long("as") if sub != "version" => kube.as_user = Some(value(&mut parser)?),
            Long("as-uid") if sub != "version" => kube.as_uid = Some(value(&mut parser)?),
            Long("as-group") if sub != "version" => kube.as_groups.push(value(&mut parser)?),
            Long("log-format") if sub != "version" => {
                log_format = LogFormat::parse(&value(&mut parser)?)?;
            }
            Long("qps") if sub != "version" => {
                let v = value(&mut parser)?;
                let q: f32 = v
                    .parse()
                    .map_err(|_| format!("--qps: invalid number {v:?}"))?;
                if !(q >= 0.0 && q.is_finite()) {
                    return Err(format!("--qps must be >= 0, got {v}"));
                }
                kube.qps = Some(q);
            }
            Long("burst") if sub != "version" => {
                let v = value(&mut parser)?;
                let b: u32 = v
                    .parse()
                    .map_err(|_| format!("--burst: invalid number {v:?}"))?;
                // 0 would let no request through; client-go refuses it too.
                if b == 0 {
                    return Err("--burst must be >= 1, got 0".into());
                }
                kube.burst = Some(b);
            }
            Long("label-key") if sub != "version" => {
                not_explain("label-key")?;
                let key = value(&mut parser)?;
                validate_label_key(&key).map_err(|e| format!("--label-key: {e}"))?;
                if is_reserved_label_key(&key) && key != AUTO_MANAGED_LABEL {
                    return Err(format!(
                        "--label-key {key:?}: the kubernetes.io and k8s.io prefixes are reserved \
                         for Kubernetes; choose a prefix of your own"
                    ));
                }
                ownership.label_key = key;
            }
            Long("adopt") if sub != "version" => {
                not_explain("adopt")?;
                ownership.adopt = bool_value(&mut parser, "adopt")?
            }
            Long("allow-empty") if sub != "version" => {
                not_explain("allow-empty")?;
                ownership.allow_empty = bool_value(&mut parser, "allow-empty")?
            }
            Long("all") => {
                listing("all")?;
                all = bool_value(&mut parser, "all")?;
            }
            Short('o') | Long("output") => {
                listing("output")?;
                output = match value(&mut parser)?.as_str() {
                    "text" => Output::Text,
                    "json" => Output::Json,
                    other => return Err(format!("-o takes text or json, got {other:?}")),
                };
            }
            Long("dry-run") => {
                plan_only("dry-run")?;
                dry_run = match value(&mut parser)?.as_str() {
                    "server" => true,
                    "none" => false,
                    other => return Err(format!("--dry-run takes server or none, got {other:?}")),
                };
            }
            Long("once") => {
                run_only("once")?;
                once = bool_value(&mut parser, "once")?;
            }
            Long("wait-available") => {
                run_only("wait-available")?;
                wait_available = true;
            }
            Long("fight-backoff-max") => {
                run_only("fight-backoff-max")?;
                let d = duration::parse(&value(&mut parser)?)
                    .map_err(|e| format!("--fight-backoff-max: {e}"))?;
                let (lo, hi) = autoregister::controller::FIGHT_BACKOFF_MAX_RANGE;
                if d < lo || d > hi {
                    return Err(format!(
                        "--fight-backoff-max must be {}..={}, got {}",
                        text::duration(lo),
                        text::duration(hi),
                        text::duration(d)
                    ));
                }
                fight_backoff_max = d;
            }
            Long("withdraw-unavailable") => {
                run_only("withdraw-unavailable")?;
                let d = duration::parse(&value(&mut parser)?)
                    .map_err(|e| format!("--withdraw-unavailable: {e}"))?;
                if d.is_zero() {
                    return Err("--withdraw-unavailable must be longer than 0".into());
                }
                withdraw_unavailable = Some(d);
            }
            Long("timeout") if sub != "version" => {
                timeout =
                    duration::parse(&value(&mut parser)?).map_err(|e| format!("--timeout: {e}"))?;
            }
            Long("workers") => {
                run_only("workers")?;
                let v = value(&mut parser)?;
                workers = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=256).contains(n))
                    .ok_or_else(|| format!("--workers must be 1..=256, got {v:?}"))?;
            }
            Long("resync") => {
                run_only("resync")?;
                let d =
                    duration::parse(&value(&mut parser)?).map_err(|e| format!("--resync: {e}"))?;
                // client-go's informers floor the resync period at 1 s; below that a resync
                // is a hot loop, so it is refused rather than silently raised. 0 = never.
                if !d.is_zero() && d < MIN_RESYNC {
                    return Err(format!(
                        "--resync must be 0 (never) or at least 1s, got {d:?}"
                    ));
                }
                resync = (!d.is_zero()).then_some(d);
            }
            Long("ca-expiry-warning") => {
                run_only("ca-expiry-warning")?;
                ca_expiry_warning = duration::parse(&value(&mut parser)?)
                    .map_err(|e| format!("--ca-expiry-warning: {e}"))?;
            }
            Long("relist") => {
                run_only("relist")?;
                let d =
                    duration::parse(&value(&mut parser)?).map_err(|e| format!("--relist: {e}"))?;
                relist = (!d.is_zero()).then_some(d);
            }
            Long("health-addr") => {
                run_only("health-addr")?;
                let v = value(&mut parser)?;
                check_listen_addr(&v).map_err(|e| format!("--health-addr: {e}"))?;
                health_addr = Some(v);
            }
            Long("leader-elect") => {
                run_only("leader-elect")?;
                leader_elect = bool_value(&mut parser, "leader-elect")?;
            }
            Long("lease-namespace") => {
                run_only("lease-namespace")?;
                lease_namespace = value(&mut parser)?;
            }
            Long("lease-name") => {
                run_only("lease-name")?;
                lease_name = value(&mut parser)?;
            }
            Long("events") => {
                run_only("events")?;
                // `--events` alone means true; `--events=false` turns Events off.
                events = bool_value(&mut parser, "events")?;
            }
            Long(
                flag @ ("leader-elect-lease-duration"
                | "leader-elect-renew-deadline"
                | "leader-elect-retry-period"),
            ) => {
                let flag = flag.to_string();
                run_only(&flag)?;
                let d =
                    duration::parse(&value(&mut parser)?).map_err(|e| format!("--{flag}: {e}"))?;
                match flag.as_str() {
                    "leader-elect-lease-duration" => leader.lease_duration = d,
                    "leader-elect-renew-deadline" => leader.renew_deadline = d,
                    _ => leader.retry_period = d,
                }
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    if sub == "version" {
        return Ok(Command::Version);
    }
    if sub == "explain" {
        if all && !names.is_empty() {
            return Err("explain takes APIService names or --all, not both".into());
        }
        return Ok(Command::Explain(Box::new(ExplainArgs {
            names,
            all,
            output,
            timeout,
            kube,
            log_format,
        })));
    }
    let manifests = manifests.ok_or_else(|| format!("`{sub}` needs --manifests PATH"))?;
    // An empty name cannot be a Lease's: refused here, not as 404s logged forever.
    for (flag, v) in [
        ("lease-namespace", &lease_namespace),
        ("lease-name", &lease_name),
    ] {
        if v.trim().is_empty() {
            return Err(format!("--{flag} must not be empty"));
        }
    }
    leader.validate()?;
    if wait_available && !once {
        return Err("--wait-available needs --once".into());
    }
    Ok(if sub == "run" {
        Command::Run(Box::new(RunArgs {
            manifests,
            once,
            wait_available,
            withdraw_unavailable,
            timeout,
            workers,
            resync,
            relist,
            health_addr,
            leader_elect,
            lease_namespace,
            lease_name,
            events,
            leader,
            ca_expiry_warning,
            fight_backoff_max,
            ownership,
            kube,
            log_format,
        }))
    } else {
        Command::Plan(Box::new(PlanArgs {
            all,
            output,
            dry_run,
            manifests,
            timeout,
            ownership,
            kube,
            log_format,
        }))
    })
}

/// `--manifests PATH` must exist when a command starts (later, a vanished PATH keeps the
/// last good set); the message names the flag.
pub fn check_manifests(path: &std::path::Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("--manifests {}: {e}", path.display())),
    }
}

/// Shortest `--resync` accepted (client-go's `minimumResyncPeriod`).
pub const MIN_RESYNC: Duration = Duration::from_secs(1);

/// Checks a listen address at argument time: `HOST:PORT` (an IP literal or a name such as
/// `localhost`) or `:PORT` (every IPv4 interface).
pub fn check_listen_addr(v: &str) -> Result<(), String> {
    let bad = || format!("invalid address {v:?} (use HOST:PORT or :PORT, e.g. :8080)");
    if v.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(());
    }
    let (host, port) = v.rsplit_once(':').ok_or_else(bad)?;
    port.parse::<u16>().map_err(|_| bad())?;
    // A host name: DNS letters only, resolved when the server binds.
    let name_ok = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if name_ok && !host.starts_with(['-', '.']) {
        Ok(())
    } else {
        Err(bad())
    }
}

/// `true`/`false` as Go's `strconv.ParseBool` reads them (`1`, `t`, `TRUE`, ...).
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// A boolean flag's value: `--flag` alone is true; `--flag=BOOL` and `--flag BOOL` (a
/// following word that reads as a boolean, there being no positional arguments) set it.
fn bool_value(parser: &mut lexopt::Parser, flag: &str) -> Result<bool, String> {
    let bad = |v: &std::ffi::OsStr| format!("--{flag} takes true or false, got {v:?}");
    if let Some(v) = parser.optional_value() {
        return parse_bool(&v.to_string_lossy()).ok_or_else(|| bad(&v));
    }
    let mut raw = parser.raw_args().map_err(|e| e.to_string())?;
    let next = raw.next_if(|a| a.to_str().and_then(parse_bool).is_some());
    Ok(next
        .and_then(|v| v.to_str().and_then(parse_bool))
        .unwrap_or(true))
}

fn value(parser: &mut lexopt::Parser) -> Result<String, String> {
    parser
        .value()
        .map_err(|e| e.to_string())?
        .into_string()
        .map_err(|v| format!("argument is not UTF-8: {v:?}"))
}

impl KubeArgs {
    /// The client-side rate limit: flags, else the defaults.
    pub fn limits(&self) -> (f32, u32) {
        (
            self.qps.unwrap_or(DEFAULT_QPS),
            self.burst.unwrap_or(DEFAULT_BURST),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Command, String> {
        parse(s.split_whitespace().map(std::ffi::OsString::from))
    }

    #[test]
    fn run_with_every_flag() {
        let Ok(Command::Run(r)) = p(
            "run --manifests m --once --timeout 2s --workers 4 --server http://x \
             --context c --kubeconfig k --qps 0 --burst 7 --resync 1m --relist 90s \
             --health-addr 127.0.0.1:0 --leader-elect --lease-namespace ns --lease-name n \
             --label-key a.example/m --adopt --allow-empty",
        ) else {
            panic!("not a run command");
        };
        assert_eq!(r.manifests, PathBuf::from("m"));
        assert!(r.once);
        assert_eq!(r.timeout, Duration::from_secs(2));
        assert_eq!(r.workers, 4);
        assert_eq!(r.resync, Some(Duration::from_secs(60)));
        assert_eq!(r.relist, Some(Duration::from_secs(90)));
        assert_eq!(r.kube.server.as_deref(), Some("http://x"));
        assert_eq!(r.kube.limits(), (0.0, 7));
        assert_eq!(r.health_addr.as_deref(), Some("127.0.0.1:0"));
        assert!(r.leader_elect);
        assert_eq!(
            (r.lease_namespace.as_str(), r.lease_name.as_str()),
            ("ns", "n")
        );
        assert_eq!(r.ownership.label_key, "a.example/m");
        assert!(r.ownership.adopt && r.ownership.allow_empty);
    }

    #[test]
    fn label_key_default_validation_and_the_upstream_warning() {
        let Ok(Command::Plan(pl)) = p("plan --manifests m") else {
            panic!("not plan")
        };
        assert_eq!(pl.ownership.label_key, DEFAULT_LABEL_KEY);
        assert!(!pl.ownership.adopt && !pl.ownership.allow_empty);
        assert!(pl.ownership.upstream_key_warning().is_none());
        assert!(p("run --manifests m --label-key Bad/Key").is_err());
        assert!(p("run --manifests m --label-key example.k8s.io/x")
            .unwrap_err()
            .contains("reserved"));
        let Ok(Command::Run(r)) = p(&format!(
            "run --manifests m --label-key {AUTO_MANAGED_LABEL}"
        )) else {
            panic!("upstream's key is allowed, with a warning")
        };
        assert!(r.ownership.upstream_key_warning().is_some());
    }

    #[test]
    fn equals_form_and_defaults() {
        let Ok(Command::Run(r)) = p("run --manifests=dir") else {
            panic!("not run")
        };
        assert_eq!(r.timeout, Duration::from_secs(60));
        assert_eq!(r.workers, 2);
        assert_eq!(r.kube.limits(), (DEFAULT_QPS, DEFAULT_BURST));
        assert!(!r.leader_elect && r.health_addr.is_none());
        assert_eq!(
            (r.lease_namespace.as_str(), r.lease_name.as_str()),
            ("kube-system", "autoregister")
        );
    }

    #[test]
    fn usage_errors() {
        assert!(p("run").unwrap_err().contains("--manifests"));
        assert!(p("plan --manifests m --once")
            .unwrap_err()
            .contains("only valid for `run`"));
        assert!(p("run --manifests m --workers 0").is_err());
        assert!(p("run --manifests m --timeout 10").is_err());
        assert!(p("run --manifests m --bogus").is_err());
        assert!(p("frobnicate").is_err());
        assert!(p("run --manifests m --qps -1").is_err());
        assert!(p("run --manifests m --burst 0")
            .unwrap_err()
            .contains(">= 1"));
        assert!(p("run --manifests m --resync 500ms")
            .unwrap_err()
            .contains("at least 1s"));
        for bad in ["8080", "localhost", ":http", "1.2.3.4:99999", "a b:80", ":"] {
            assert!(
                p(&format!("run --manifests m --health-addr {bad}")).is_err(),
                "{bad}"
            );
        }
        assert!(p("run --manifests m --events=maybe").is_err());
        assert!(p("plan --manifests m --events").is_err());
        assert!(p("run --manifests m --lease-namespace=")
            .unwrap_err()
            .contains("--lease-namespace must not be empty"));
        assert!(p("run --manifests m --lease-name=")
            .unwrap_err()
            .contains("--lease-name must not be empty"));
        assert!(
            p("run --manifests m --leader-elect-renew-deadline 20s")
                .unwrap_err()
                .contains("renew deadline"),
            "renew deadline past the lease duration"
        );
    }

    #[test]
    fn plan_timeout_and_leader_timings() {
        let Ok(Command::Plan(pl)) = p("plan --manifests m") else {
            panic!("not plan")
        };
        assert_eq!(pl.timeout, Duration::from_secs(30));
        let Ok(Command::Plan(pl)) = p("plan --manifests m --timeout 2s") else {
            panic!("not plan")
        };
        assert_eq!(pl.timeout, Duration::from_secs(2));
        let Ok(Command::Run(r)) = p("run --manifests m --leader-elect-lease-duration 2s \
             --leader-elect-renew-deadline 1200ms --leader-elect-retry-period 200ms")
        else {
            panic!("not run")
        };
        assert_eq!(r.leader.lease_duration, Duration::from_secs(2));
        assert_eq!(r.leader.renew_deadline, Duration::from_millis(1200));
        assert_eq!(r.leader.retry_period, Duration::from_millis(200));
    }

    #[test]
    fn listen_addresses_and_events_switch() {
        for good in [
            ":8080",
            "0.0.0.0:8080",
            "[::]:8080",
            "localhost:0",
            "127.0.0.1:0",
        ] {
            assert_eq!(check_listen_addr(good), Ok(()), "{good}");
        }
        let events = |s: &str| match p(s) {
            Ok(Command::Run(r)) => r.events,
            other => panic!("{other:?}"),
        };
        assert!(events("run --manifests m"));
        assert!(events("run --manifests m --events"));
        assert!(!events("run --manifests m --events=false"));
        assert!(events("run --manifests m --events=true"));
        let Ok(Command::Run(r)) = p("run --manifests m --resync 0s") else {
            panic!("not run")
        };
        assert_eq!(r.resync, None, "0 means never");
    }

    #[test]
    fn version_and_help() {
        assert!(matches!(p("version"), Ok(Command::Version)));
        assert!(matches!(p("-V"), Ok(Command::Version)));
        assert!(matches!(p("--version"), Ok(Command::Version)));
        assert!(matches!(p("--help"), Ok(Command::Help(None))));
        assert!(matches!(p(""), Ok(Command::Help(None))));
        assert!(matches!(p("help"), Ok(Command::Help(None))));
        assert!(matches!(p("help run"), Ok(Command::Help(Some(t))) if t == "run"));
        assert!(matches!(p("plan --manifests m -h"), Ok(Command::Help(Some(t))) if t == "plan"));
        assert!(p("help bogus").unwrap_err().contains("unknown command"));
        assert!(p("help run plan").is_err());
    }

    #[test]
    fn every_flag_takes_both_forms_and_booleans_take_a_value() {
        let r = |s: &str| match p(s) {
            Ok(Command::Run(r)) => r,
            other => panic!("{s}: {other:?}"),
        };
        assert!(!r("run --manifests m --events false").events);
        assert!(!r("run --manifests m --events=false").events);
        assert!(r("run --manifests m --events true").events);
        let a = r("run --manifests m --adopt true --once=false --allow-empty 1 --leader-elect f");
        assert!(a.ownership.adopt && !a.once && a.ownership.allow_empty && !a.leader_elect);
        // A flag after a boolean is a flag, not its value.
        let a = r("run --manifests m --events --once");
        assert!(a.events && a.once);
        assert_eq!(r("run --manifests=m --workers=3").workers, 3);
        assert_eq!(r("run --manifests m --workers 3").workers, 3);
        assert_eq!(r("run --manifests m").log_format, LogFormat::Text);
        assert_eq!(
            r("run --manifests m --log-format json").log_format,
            LogFormat::Json
        );
        assert_eq!(
            r("run --manifests m --log-format=text").log_format,
            LogFormat::Text
        );
        assert!(p("run --manifests m --log-format xml")
            .unwrap_err()
            .contains("text or json"));
        assert!(p("run --manifests m --adopt maybe").is_err());
    }
}

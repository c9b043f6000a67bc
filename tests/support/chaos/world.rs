//! One chaos run's world: the test API server, the manifests directory, the controller
//! process, and the timeline of everything the run did, for the invariant checker.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use autoregister::api::{APIServiceSpec, DEFAULT_LABEL_KEY};
use autoregister::controller::manifests::ManifestSet;
use autoregister::testserver::{builtin_apiservices, RvChange, TestServer};
use serde_json::{json, Value};

use super::schedule::{Step, FILES, FOREIGN, POOL};
use crate::binary::{Proc, Scratch};
use crate::rng::Rng;

/// Pool name `i`: may be declared by the manifests.
pub fn pool_name(i: usize) -> String {
    format!("v1.c{i}.example.com")
}

/// Foreign name `i`: only other writers use it.
pub fn foreign_name(i: usize) -> String {
    format!("v1.u{i}.example.com")
}

/// The effective desired set after one manifest edit, as `ManifestSet` (the code the
/// binary runs) computes it.
#[derive(Clone, Debug)]
pub struct DesiredVersion {
    /// When the files took this state.
    pub at: SystemTime,
    /// Name → spec.
    pub specs: BTreeMap<String, APIServiceSpec>,
    /// A file failed to parse: which last good objects the controller keeps depends on
    /// which versions it happened to read, so deletes are not judged in this version.
    pub ambiguous: bool,
}

/// Leader election timings of the leader-elect flavour (`--leader-elect-*`): short, so a
/// handover after a crash (lease expiry) fits in a chaos run.
pub const LEASE_DURATION: Duration = Duration::from_secs(2);
/// See [`LEASE_DURATION`].
pub const RENEW_DEADLINE: Duration = Duration::from_millis(1500);
/// See [`LEASE_DURATION`].
pub const RETRY_PERIOD: Duration = Duration::from_millis(250);

/// Which world a seed runs in, drawn from its own stream so that the schedule of a seed
/// (and the seeds pinned in `tests/chaos.rs`) stays what it was.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flavour {
    /// The server plays kube-apiserver: its built-in APIServices, which other writers edit
    /// and delete, and which the controller must never write.
    pub kube_apiserver: bool,
    /// Two controller replicas with `--leader-elect`; restarts hit either one, so the
    /// lease changes hands (released on SIGTERM, expired after SIGKILL).
    pub leader_elect: bool,
}

impl Flavour {
    /// The flavour of `seed`.
    pub fn of(seed: u64) -> Flavour {
        let mut r = Rng::new(seed ^ 0x6b75_6265_6170_6973);
        Flavour {
            kube_apiserver: r.chance(1.0 / 3.0),
            leader_elect: r.chance(1.0 / 3.0),
        }
    }
}

/// The user (in the request log) of controller process `i`: each process has its own
/// bearer token, so every request is attributed to the process that sent it.
pub fn proc_user(i: usize) -> String {
    format!("controller-{i}")
}

/// One controller process.
#[derive(Debug)]
pub struct ProcSpan {
    /// The user its requests are logged as (see [`proc_user`]).
    pub user: String,
    /// Spawned at.
    pub started: SystemTime,
    /// SIGTERM sent at (none: killed, or still running).
    pub terminated: Option<SystemTime>,
    /// Exit code after SIGTERM (none: killed or did not exit in time).
    pub code: Option<i32>,
    /// How long it took to exit after SIGTERM.
    pub exit_after: Option<Duration>,
    /// Its log (kept for failure reports).
    pub log: String,
}

/// What the run did, in order.
#[derive(Debug, Default)]
pub struct Timeline {
    /// The desired set over time (first entry: at the controller's first start).
    pub desired: Vec<DesiredVersion>,
    /// The seed's flavour.
    pub flavour: Flavour,
    /// UIDs of objects other writers created without our label.
    pub foreign_uids: HashSet<String>,
    /// Names that are never ours in this run (other writers' own, kube-apiserver's built-ins).
    pub never_ours: HashSet<String>,
    /// When the API server lost its data (the Lease too). A replica that never saw the old
    /// Lease (started just before the loss) may create a fresh one while the old leader
    /// leads on until its next renewal finds it, so "only the lease holder writes" is not
    /// judged for a renew deadline after that.
    pub data_lost: Vec<SystemTime>,
    /// Every controller process, in order.
    pub procs: Vec<ProcSpan>,
    /// When the faults and the other writers stopped.
    pub faults_stopped: Option<SystemTime>,
    /// When the final state was first seen converged.
    pub converged: Option<SystemTime>,
    /// The window that must be free of writes (after convergence).
    pub quiet: Option<(SystemTime, SystemTime)>,
    /// What the final state lacks when it never converged.
    pub unconverged: Vec<String>,
    /// One line per step, for the report.
    pub steps: Vec<String>,
    /// Processes that exited on their own (not after a lost lease): index and exit code.
    pub unexpected_exits: Vec<(usize, i32)>,
    /// When 429s with `Retry-After: 0` were being answered (issue 11's hot loop).
    pub retry_after_zero: Vec<(SystemTime, SystemTime)>,
}

/// The run: server, manifests, controller, timeline.
pub struct World {
    /// The test API server.
    pub server: TestServer,
    scratch: Scratch,
    /// The controller replicas (one, or two with leader election) and each one's span.
    slots: Vec<Option<(Proc, usize)>>,
    seed: u64,
    /// Draws for the flavour's own choices (which replica restarts, which built-in is
    /// touched), apart from the schedule's stream.
    side: Rng,
    model: ManifestSet,
    files: Vec<Vec<u8>>,
    /// What happened.
    pub t: Timeline,
    rng: Rng,
}

fn manifest_doc(i: usize, priority: u32) -> String {
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {}\nspec:\n  \
         group: c{i}.example.com\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: {priority}\n  \
         service:\n    namespace: ns\n    name: svc\n    port: 443\n  insecureSkipTLSVerify: true\n",
        pool_name(i)
    )
}

fn unlabelled(name: &str, group: &str, priority: u32) -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name},
        "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 100,
                 "versionPriority": priority,
                 "service": {"namespace": "other", "name": "theirs", "port": 443},
                 "insecureSkipTLSVerify": true}
    })
}

/// The log of a replica that exited because its lease was lost.
fn lost_lease(log: &str) -> bool {
    log.contains("leader election lost")
}

/// Carries our ownership label (kube-apiserver's built-ins carry only its own).
fn is_ours(o: &Value) -> bool {
    o["metadata"]["labels"][DEFAULT_LABEL_KEY]
        .as_str()
        .is_some_and(|v| v == "true" || v == "onstart")
}

impl World {
    /// A server with a few unowned objects, and valid manifests declaring part of the pool.
    pub fn new(seed: u64, rng: &mut Rng) -> World {
        let flavour = Flavour::of(seed);
        // TLS: each replica authenticates with a token of its own, and tokens go only over TLS.
        let server = TestServer::builder()
            .tls(true)
            .kube_apiserver(flavour.kube_apiserver)
            .start()
            .expect("start the test server");
        let scratch = Scratch::new(&format!("chaos-{seed}"));
        let model = ManifestSet::new(scratch.manifests(), DEFAULT_LABEL_KEY);
        let mut w = World {
            server,
            scratch,
            slots: (0..if flavour.leader_elect { 2 } else { 1 })
                .map(|_| None)
                .collect(),
            seed,
            side: Rng::new(seed ^ 0x7369_6465),
            model,
            files: vec![Vec::new(); FILES.len()],
            t: Timeline {
                flavour,
                ..Timeline::default()
            },
            rng: rng.clone(),
        };
        if flavour.kube_apiserver {
            for name in builtin_apiservices() {
                if let Some(o) = w.server.get_object("apiservices", None, &name) {
                    w.t.foreign_uids.insert(Self::uid_of(&o));
                }
                w.t.never_ours.insert(name);
            }
        }
        for i in 0..FOREIGN {
            w.t.never_ours.insert(foreign_name(i));
            w.create_foreign(&foreign_name(i));
        }
        if w.rng.chance(0.3) {
            // A desired name already held by someone else (table row 3).
            let i = w.rng.below(POOL);
            w.create_foreign(&pool_name(i));
        }
        w.rewrite_valid();
        *rng = w.rng.clone();
        w
    }

    /// Starts every replica that is not running.
    pub fn start_controllers(&mut self) {
        for slot in 0..self.slots.len() {
            if self.slots[slot].is_none() {
                self.start_controller(slot);
            }
        }
    }

    /// Starts a controller process in `slot`, with a bearer token of its own.
    fn start_controller(&mut self, slot: usize) {
        assert!(self.slots[slot].is_none());
        // Restarts happen only on valid manifests: a process starting on a broken file
        // exits 2 by design (bad manifest), which is not what a restart tests.
        if self.t.desired.last().is_some_and(|d| d.ambiguous) {
            self.rewrite_valid();
        }
        let i = self.t.procs.len();
        let user = proc_user(i);
        let token = format!("chaos-{}-{i}", self.seed);
        self.server.add_user(&token, &user);
        let kubeconfig = self.scratch.path(&format!("kubeconfig-{i}"));
        std::fs::write(&kubeconfig, self.server.kubeconfig_with_token(Some(&token)))
            .expect("write a kubeconfig");
        self.t.procs.push(ProcSpan {
            user,
            started: SystemTime::now(),
            terminated: None,
            code: None,
            exit_after: None,
            log: String::new(),
        });
        let durations = [
            format!("{}ms", LEASE_DURATION.as_millis()),
            format!("{}ms", RENEW_DEADLINE.as_millis()),
            format!("{}ms", RETRY_PERIOD.as_millis()),
        ];
        let mut args = vec!["--workers", "2"];
        if self.t.flavour.leader_elect {
            args.extend([
                "--leader-elect",
                "--leader-elect-lease-duration",
                &durations[0],
                "--leader-elect-renew-deadline",
                &durations[1],
                "--leader-elect-retry-period",
                &durations[2],
            ]);
        }
        let mut p = Proc::run_with_kubeconfig(&kubeconfig, &self.scratch, &args);
        // Steps wait until it has read the manifests (a file truncated before it read PATH
        // makes it exit 2 as a bad manifest) and connected: a SIGTERM then stops a running
        // controller, which is what a restart tests. A replica waiting for the lease has
        // done both.
        crate::binary::wait_until_within(Duration::from_secs(10), || {
            let log = p.log();
            log.contains(" started: ")
                || log.contains("leader election: waiting for lease")
                || p.exited().is_some()
        });
        self.slots[slot] = Some((p, i));
    }

    /// Stops every replica (see [`stop_controller`](Self::stop_controller)).
    pub fn stop_controllers(&mut self, graceful: bool) {
        for slot in 0..self.slots.len() {
            self.stop_controller(slot, graceful);
        }
    }

    /// SIGTERM (clean stop, timed) or SIGKILL (a crash) to the replica in `slot`, unless
    /// it already ended on its own.
    fn stop_controller(&mut self, slot: usize, graceful: bool) {
        if self.reap(slot) {
            return;
        }
        let Some((p, i)) = self.slots[slot].take() else {
            return;
        };
        let span = &mut self.t.procs[i];
        if graceful {
            let at = SystemTime::now();
            span.terminated = Some(at);
            // Exit within 2 s is the contract; 10 s tells "slow machine" from "stuck".
            let (code, log) = p.terminate_within(Duration::from_secs(10));
            span.exit_after = at.elapsed().ok();
            span.code = code;
            if code == Some(1) && lost_lease(&log) && !log.contains(super::check::SIGTERM_HANDLED) {
                // It was exiting on its own when the signal came: not a SIGTERM exit.
                span.terminated = None;
            }
            span.log = log;
        } else {
            span.log = p.log();
            p.kill();
        }
    }

    /// Takes out the replica in `slot` if it ended on its own (true). One that lost its
    /// lease exits 1 by design, so that a restart competes afresh; any other exit is recorded
    /// as unexpected.
    fn reap(&mut self, slot: usize) -> bool {
        let Some(code) = self.slots[slot].as_mut().and_then(|(p, _)| p.exited()) else {
            return false;
        };
        let Some((p, i)) = self.slots[slot].take() else {
            return false;
        };
        let log = p.log();
        if code == 1 && lost_lease(&log) {
            self.t
                .steps
                .push(format!("(process {i} lost the lease and exited 1)"));
        } else {
            self.t.unexpected_exits.push((i, code));
        }
        self.t.procs[i].log = log;
        true
    }

    /// Restarts every replica that ended on its own, as the kubelet would (an unexpected
    /// exit is in the timeline for the checker).
    pub fn restart_exited(&mut self) {
        for slot in 0..self.slots.len() {
            if self.reap(slot) {
                self.start_controller(slot);
            }
        }
    }

    fn record_desired(&mut self) {
        let r = self.model.reload();
        self.t.desired.push(DesiredVersion {
            at: SystemTime::now(),
            specs: r
                .desired
                .into_iter()
                .map(|(k, d)| (k, d.object.spec.clone()))
                .collect(),
            ambiguous: !r.errors.is_empty(),
        });
    }

    fn write_file(&mut self, file: usize, bytes: Vec<u8>) {
        self.scratch.write_bytes(FILES[file], &bytes);
        self.files[file] = bytes;
    }

    /// The manifests declare a random non-empty part of the pool, all valid.
    pub fn rewrite_valid(&mut self) {
        let mut declared: Vec<bool> = (0..POOL).map(|_| self.rng.chance(0.7)).collect();
        let any = self.rng.below(POOL);
        declared[any] = true;
        let priorities: Vec<u32> = (0..POOL).map(|_| self.rng.range(1, 999) as u32).collect();
        self.rewrite(&declared, &priorities);
    }

    fn rewrite(&mut self, declared: &[bool], priorities: &[u32]) {
        let mut texts = vec![String::new(); FILES.len()];
        for i in 0..POOL {
            if declared[i] {
                let f = i % FILES.len();
                if !texts[f].is_empty() {
                    texts[f].push_str("---\n");
                }
                texts[f].push_str(&manifest_doc(i, priorities[i]));
            }
        }
        for (f, text) in texts.into_iter().enumerate() {
            self.write_file(f, text.into_bytes());
        }
        self.record_desired();
    }

    fn create_foreign(&mut self, name: &str) {
        if self.server.get_object("apiservices", None, name).is_some() {
            return;
        }
        let group = name.trim_start_matches("v1.");
        let p = self.rng.range(1, 999) as u32;
        let o = self
            .server
            .seed("apiservices", None, unlabelled(name, group, p));
        if let Some(uid) = o["metadata"]["uid"].as_str() {
            self.t.foreign_uids.insert(uid.to_string());
        }
    }

    fn uid_of(o: &Value) -> String {
        o["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs one step, holding it for `hold_ms`, then undoes what must not outlive it.
    pub fn apply(&mut self, step: &Step, hold_ms: u64) {
        let hold = Duration::from_millis(hold_ms);
        self.t.steps.push(format!("{step:?} for {hold_ms} ms"));
        // Work for the controller to be doing when the fault lands.
        match step {
            Step::Throttle {
                with_work: true, ..
            } => self.edit_some_ours(),
            Step::Restart { busy: true, .. } => {
                self.server.faults().set_latency(Duration::from_millis(100));
                for _ in 0..3 {
                    self.edit_some_ours();
                }
                // Let the events reach the workers, so the signal finds them writing.
                std::thread::sleep(Duration::from_millis(30));
            }
            _ => {}
        }
        let f = self.server.faults();
        match step {
            Step::Fail { code, count, verb } => f.fail_next_verb(*verb, *count, *code),
            Step::Throttle {
                per_mille,
                retry_after,
                ..
            } => {
                match retry_after {
                    Some(s) => f.set_retry_after(*s),
                    None => f.omit_retry_after(),
                }
                let from = SystemTime::now();
                f.fail_fraction(f64::from(*per_mille) / 1000.0, 429);
                std::thread::sleep(hold);
                f.fail_fraction(0.0, 429);
                if *retry_after == Some(0) {
                    self.t.retry_after_zero.push((from, SystemTime::now()));
                }
                return;
            }
            Step::Latency { ms } => {
                f.set_latency(Duration::from_millis(*ms));
                std::thread::sleep(hold);
                f.set_latency(Duration::ZERO);
                return;
            }
            Step::StallWatches => {
                f.stall_watches(true);
                std::thread::sleep(hold);
                f.stall_watches(false);
                return;
            }
            Step::DropConnections => self.server.restart(RvChange::Keep),
            Step::ExpireWatch => {
                f.expire_next_watch();
                self.server.restart(RvChange::Keep);
            }
            Step::ConflictUpdates { count } => f.race_next_updates(*count),
            Step::Pause => {
                f.pause();
                std::thread::sleep(hold);
                f.resume();
                return;
            }
            Step::EditOurs { i, priority } => {
                if let Some(mut o) = self.server.get_object("apiservices", None, &pool_name(*i)) {
                    if !self.t.foreign_uids.contains(&Self::uid_of(&o)) {
                        o["spec"]["versionPriority"] = json!(priority);
                        self.server.seed("apiservices", None, o);
                    }
                }
            }
            Step::DeleteOurs { i } => {
                if let Some(o) = self.server.get_object("apiservices", None, &pool_name(*i)) {
                    if !self.t.foreign_uids.contains(&Self::uid_of(&o)) {
                        self.server
                            .delete_object("apiservices", None, &pool_name(*i));
                    }
                }
            }
            Step::CreateForeign { pool, i } => {
                let name = if *pool {
                    pool_name(*i)
                } else {
                    foreign_name(*i)
                };
                self.create_foreign(&name);
            }
            Step::TouchForeign { i, delete } => {
                if self.t.flavour.kube_apiserver {
                    self.touch_builtin();
                }
                let name = if *i < POOL {
                    pool_name(*i)
                } else {
                    foreign_name(*i - POOL)
                };
                if let Some(mut o) = self.server.get_object("apiservices", None, &name) {
                    if self.t.foreign_uids.contains(&Self::uid_of(&o)) {
                        if *delete {
                            self.server.delete_object("apiservices", None, &name);
                        } else {
                            o["spec"]["versionPriority"] = json!(self.rng.range(1, 999));
                            self.server.seed("apiservices", None, o);
                        }
                    }
                }
            }
            Step::Rewrite {
                declared,
                priorities,
            } => self.rewrite(declared, priorities),
            Step::Truncate {
                file,
                keep_per_mille,
            } => {
                let mut bytes = self.files[*file].clone();
                bytes.truncate(bytes.len() * *keep_per_mille as usize / 1000);
                self.write_file(*file, bytes);
                self.record_desired();
            }
            Step::Empty { file } => {
                self.write_file(*file, Vec::new());
                self.record_desired();
            }
            Step::Restart { graceful, .. } => {
                let slot = self.side.below(self.slots.len());
                self.stop_controller(slot, *graceful);
                self.server.faults().set_latency(Duration::ZERO);
                self.start_controller(slot);
            }
            Step::Idle => {}
            Step::ServerRestartEmpty { jump } => {
                let rv = if *jump {
                    RvChange::Jump(1000)
                } else {
                    RvChange::Keep
                };
                self.t.data_lost.push(SystemTime::now());
                self.server.restart_empty(rv);
            }
        }
        std::thread::sleep(hold);
    }

    /// Another writer (an admin) edits or deletes one of kube-apiserver's built-ins.
    fn touch_builtin(&mut self) {
        let names = builtin_apiservices();
        let name = &names[self.side.below(names.len())];
        let Some(mut o) = self.server.get_object("apiservices", None, name) else {
            return;
        };
        if self.side.chance(0.3) {
            self.server.delete_object("apiservices", None, name);
        } else {
            o["spec"]["versionPriority"] = json!(self.side.range(1, 99));
            self.server.seed("apiservices", None, o);
        }
    }

    /// Another writer changes the spec of one of our objects, if there is one.
    fn edit_some_ours(&mut self) {
        let ours: Vec<Value> = self
            .server
            .list_objects("apiservices", None)
            .into_iter()
            .filter(is_ours)
            .collect();
        if ours.is_empty() {
            return;
        }
        let mut o = ours[self.rng.below(ours.len())].clone();
        o["spec"]["versionPriority"] = json!(self.rng.range(1, 999));
        self.server.seed("apiservices", None, o);
    }

    /// Faults off, other writers done, a final valid manifest: from here it must converge.
    pub fn stop_faults(&mut self) {
        self.server.faults().clear();
        self.rewrite_valid();
        self.t.faults_stopped = Some(SystemTime::now());
    }

    /// What the final state lacks (empty when converged): every desired name is ours
    /// with the desired spec (unless someone else holds it), nothing else of ours is left.
    pub fn missing(&self) -> Vec<String> {
        let want = &self.t.desired.last().expect("a desired set").specs;
        let mut missing = Vec::new();
        // One snapshot: a list, then a get per name, could see an empty server and then
        // an object created in between, and call a half-written state converged (seed 668).
        let objects = self.server.list_objects("apiservices", None);
        let mut present = HashSet::new();
        for o in &objects {
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            present.insert(name.clone());
            let foreign = self.t.foreign_uids.contains(&Self::uid_of(o));
            let labelled = is_ours(o);
            match want.get(&name) {
                _ if foreign => {}
                Some(spec) => {
                    let got: Option<APIServiceSpec> =
                        serde_json::from_value(o["spec"].clone()).ok();
                    if got.as_ref() != Some(spec) {
                        missing.push(format!(
                            "{name}: spec differs (versionPriority {} wanted, {} stored)",
                            spec.version_priority, o["spec"]["versionPriority"]
                        ));
                    }
                    if !labelled {
                        missing.push(format!("{name}: not labelled"));
                    }
                }
                None if labelled => missing.push(format!("{name}: ours but not desired")),
                None => {}
            }
        }
        for name in want.keys().filter(|n| !present.contains(*n)) {
            missing.push(format!("{name}: absent"));
        }
        missing
    }

    /// Waits (up to `bound`) for convergence, then keeps a quiet window under watch. With
    /// leader election the state counts as converged only once `lease_lost_grace` has passed
    /// since the API server last lost its data: until then the old leader may still write by
    /// its own term beside a replica that created a fresh Lease (as client-go's would; seed
    /// 15 saw its last write 7 ms before it learnt of the other), so a state seen converged
    /// earlier is not final yet.
    pub fn await_convergence(
        &mut self,
        bound: Duration,
        settle: Duration,
        quiet: Duration,
        lease_lost_grace: Duration,
    ) {
        let term_over = self
            .t
            .data_lost
            .last()
            .filter(|_| self.t.flavour.leader_elect)
            .map(|lost| *lost + lease_lost_grace);
        // Replicas that exit meanwhile (a lease lost just before the faults stopped) are
        // restarted, as throughout the run.
        let ok = crate::binary::wait_until_within(bound, || {
            self.restart_exited();
            term_over.is_none_or(|t| SystemTime::now() >= t) && self.missing().is_empty()
        });
        if !ok {
            self.t.unconverged = self.missing();
            return;
        }
        let now = SystemTime::now();
        self.t.converged = Some(now);
        std::thread::sleep(settle);
        let from = SystemTime::now();
        std::thread::sleep(quiet);
        self.t.quiet = Some((from, SystemTime::now()));
    }
}

//! `autoregister plan`: what `run` would do for every name, proven by a server-side dry run
//! (`dryRun=All`) unless `--dry-run=none`; nothing is stored.

mod availability;
mod diff;
mod entry;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{json, Value};

use autoregister::api::{APIService, Resource};
use autoregister::client::{Api, Canceller, DeleteParams};
use autoregister::controller::load;
use autoregister::controller::{decide, Action, Applied, Current, Facts};
use autoregister::runtime::reflector::list_all;
use crossbeam_channel::RecvTimeoutError;

use super::args::{Output, PlanArgs};
use super::signals::Stop;
use super::{connect, exit, Failure};
use entry::{DryRun, Entry};

/// Beyond `--timeout`, how long the whole plan may take (several pages of a list).
const PLAN_SLACK: std::time::Duration = std::time::Duration::from_millis(500);

/// Dry-run requests in flight at once: a plan of thousands of writes should not take one
/// round trip each in turn (the client's rate limit still applies).
const DRY_RUN_THREADS: usize = 4;

/// Runs `plan`; returns the exit code. `stop` has been handling SIGTERM/SIGINT since before
/// this began: a signal ends the plan at once (requests and an exec plugin cancelled, no
/// dry-run write sent after it) with exit 1 and no plan printed, as it is incomplete.
pub fn plan(args: &PlanArgs, stop: &Stop) -> Result<i32, Failure> {
    let o = &args.ownership;
    if let Some(w) = o.upstream_key_warning() {
        eprintln!("autoregister: warning: {w}");
    }
    let mut ownership = o.ownership();
    let loaded = load(&args.manifests, &ownership.label_key);
    if stop.signalled() {
        return Err(stopped(stop));
    }
    let mut desired = loaded.map_err(Failure::usage)?;
    let signalled = stop.flag();
    let client = connect::client(&args.kube)?
        .with_timeout(args.timeout)
        // The handler's own flag: no dry-run write leaves after the signal.
        .with_write_gate(Arc::new(move || match signalled.load(Ordering::SeqCst) {
            true => Err("stopping: a signal was received".into()),
            false => Ok(()),
        }));
    // The fieldManager `run` writes with: the program named by the User-Agent.
    ownership.field_manager = client.config().program_name().to_string();
    // `--timeout` bounds every request (an exec plugin run included), and, with a little
    // slack so a single hung request reports its own cause first, the whole plan. A
    // signal cancels the same way, from the signal thread.
    let cancel = Canceller::new();
    {
        let cancel = cancel.clone();
        stop.on_signal(move || cancel.cancel());
    }
    let timer = {
        let cancel = cancel.clone();
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
        let timeout = args.timeout.saturating_add(PLAN_SLACK);
        std::thread::Builder::new()
            .name("plan-timeout".into())
            .spawn(move || {
                // Dropping the sender (the plan finished) ends the wait without cancelling.
                if done_rx.recv_timeout(timeout) == Err(RecvTimeoutError::Timeout) {
                    cancel.cancel();
                }
            })
            .map(|_| done_tx)
            .map_err(|e| Failure::failed(format!("cannot start the timeout thread: {e}")))?
    };
    let api: Api<APIService> = Api::all(client.clone().with_canceller(&cancel));
    let listed = list_all(&api, 500, None, &cancel);
    if stop.signalled() {
        return Err(stopped(stop));
    }
    // One cause, one message: nothing can be planned without the list, whatever the count.
    let cannot_list = |why: String| {
        Failure::failed(format!(
            "cannot list APIServices: {why}; no plan for the {} desired APIServices",
            desired.len()
        ))
    };
    let existing: BTreeMap<String, APIService> = match listed {
        // `None`: cancelled (the timeout), not an empty cluster.
        // Inserted one by one: `collect` would compile a sort for this map's entries.
        Ok(Some(listed)) => {
            let mut existing = BTreeMap::new();
            for o in listed.items {
                existing.insert(o.name().to_string(), o);
            }
            existing
        }
        Ok(None) => {
            return Err(cannot_list(format!(
                "no answer within {:?} (--timeout)",
                args.timeout
            )))
        }
        Err(e) if e.is_cancelled() => {
            return Err(cannot_list(format!(
                "no answer within {:?} (--timeout)",
                args.timeout
            )))
        }
        Err(e) => return Err(cannot_list(e.to_string())),
    };
    // After the list (so a server or plugin that never answers is reported as the list's
    // failure), before any dry run; within the plan's bound, which ends the question too.
    let within = args.timeout.min(super::server_version::ASK_WITHIN);
    if let Some(refusal) = super::server_version::too_old(&client, &cancel, within) {
        return Err(Failure::failed(refusal));
    }
    if stop.signalled() {
        return Err(stopped(stop));
    }
    // CA bundles from their sources, read once each; a source that gives none holds its name.
    // Through the canceller too: a signal (or the timeout) ends these reads as well.
    let bundles = autoregister::controller::ca::fill_for_plan(api.client(), &mut desired);
    let names: BTreeSet<&String> = desired.keys().chain(existing.keys()).collect();
    let mut entries: Vec<Entry> = names
        .into_iter()
        .map(|name| {
            let current = existing.get(name);
            // As if `run` started now: nothing synced yet, everything listed is present at start.
            let mut d = decide(
                &ownership,
                &Facts {
                    desired: desired.get(name),
                    current: current.map_or(Current::NotFound, Current::Present),
                    synced_once: false,
                    present_at_start: current.is_some(),
                    desired_set_empty: desired.is_empty(),
                    withdrawal: Default::default(),
                },
            );
            let bundle = bundles.get(name.as_str()).cloned();
            if let Some(why) = bundle
                .as_ref()
                .filter(|b| b.source.is_some())
                .and_then(|b| b.bundle.as_ref().err())
            {
                // `run` writes nothing for it until the source is fixed.
                d.action = Action::Blocked(format!("CA bundle not usable: {why}"));
            }
            let mut e = Entry::new(name, d, current, desired.contains_key(name), &ownership);
            // Under each of our objects (and one we would adopt): fields left to others.
            if let (Some(cur), Some(want)) = (current, desired.get(name)) {
                if ownership.is_managed(cur) || matches!(e.action, Action::Adopt(_)) {
                    e.kept = Applied::of(&ownership, want)
                        .kept(cur, &ownership.field_manager)
                        .into_iter()
                        .map(|(p, by)| (p.to_string(), by))
                        .collect();
                }
            }
            e.ca = bundle;
            e.available = availability::column(current, &ownership);
            e.unavailable = availability::detail(current, &ownership);
            e
        })
        .collect();
    // Desired names with no object: a running instance may hold them withdrawn.
    let absent: Vec<&str> = desired
        .keys()
        .filter(|n| !existing.contains_key(*n))
        .map(String::as_str)
        .collect();
    match availability::events(&client, &cancel) {
        Ok(events) => {
            let withdrawn = availability::withdrawn(&events, &absent);
            let fights = availability::fights(&events, std::time::SystemTime::now());
            for e in &mut entries {
                e.withdrawn = withdrawn.get(&e.name).cloned();
                e.fight = fights.get(&e.name).cloned();
            }
        }
        Err(e) => eprintln!(
            "autoregister: cannot tell which APIServices are withdrawn or in a fight (listing Events: {e})"
        ),
    }
    if args.dry_run {
        let dry = api
            .clone()
            .with_field_manager(ownership.field_manager.clone())
            .with_dry_run();
        dry_run_all(&dry, &mut entries);
    }
    drop(timer);
    // Cancelled lookups and dry runs would read as answers: nothing is printed.
    if stop.signalled() {
        return Err(stopped(stop));
    }
    let refused = entries
        .iter()
        .filter(|e| matches!(e.dry_run, DryRun::Refused(_)))
        .count();
    match args.output {
        Output::Text => print_text(args, &entries),
        Output::Json => print_json(args, &entries),
    }
    if refused > 0 {
        eprintln!(
            "autoregister: the server refused {refused} of the planned writes in the dry run; \
             run would fail on them"
        );
        return Ok(exit::FAILED);
    }
    Ok(exit::OK)
}

/// A signal ended the plan before it was complete: exit 1 (not a plan), said once.
fn stopped(stop: &Stop) -> Failure {
    stop.wait_announced();
    Failure::failed("stopped by a signal before the plan was complete; no plan printed")
}

/// Sends each planned write with `dryRun=All`, a few at a time, and records the answers.
fn dry_run_all(api: &Api<APIService>, entries: &mut [Entry]) {
    let mut writes: Vec<&mut Entry> = entries
        .iter_mut()
        .filter(|e| {
            matches!(
                e.action,
                Action::Create(_) | Action::Update(_) | Action::Adopt(_) | Action::Delete { .. }
            )
        })
        .collect();
    if writes.is_empty() {
        return;
    }
    let per_thread = writes.len().div_ceil(DRY_RUN_THREADS);
    std::thread::scope(|s| {
        for chunk in writes.chunks_mut(per_thread) {
            s.spawn(move || {
                for e in chunk.iter_mut() {
                    e.dry_run = match dry_run_one(api, &e.action) {
                        Ok(()) => DryRun::Accepted,
                        Err(why) => DryRun::Refused(why),
                    };
                }
            });
        }
    });
}

fn dry_run_one(api: &Api<APIService>, action: &Action) -> Result<(), String> {
    let sent = match action {
        Action::Create(obj) => api.create_unread(obj),
        // The same apply `run` sends (its takeover of managedFields is bookkeeping, and
        // not sent: a dry run of it would not make the apply see it).
        Action::Update(a) | Action::Adopt(a) => api.apply_unread(&a.config, true),
        Action::Delete {
            name,
            uid,
            resource_version,
        } => api.delete(
            name,
            &DeleteParams {
                uid: Some(uid.clone()),
                resource_version: resource_version.clone(),
            },
        ),
        _ => Ok(()),
    };
    sent.map_err(|e| e.to_string())
}

/// What was asked of the server, for both outputs.
fn dry_run_mode(args: &PlanArgs) -> &'static str {
    if args.dry_run {
        "server"
    } else {
        "none"
    }
}

/// Counts per action over every name (shown or not), e.g. `2 create, 21 none`.
fn counts(entries: &[Entry]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for e in entries {
        *counts.entry(e.action.verb()).or_default() += 1;
    }
    counts
}

fn print_text(args: &PlanArgs, entries: &[Entry]) {
    // One buffer, not a write per line: a plan of 10,000 creates is ~100,000 lines.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if let Err(e) = write_text(&mut out, args, entries).and_then(|()| out.flush()) {
        super::output::write_failed(&e);
    }
}

fn write_text(out: &mut impl Write, args: &PlanArgs, entries: &[Entry]) -> std::io::Result<()> {
    let shown: Vec<&Entry> = entries
        .iter()
        .filter(|e| args.all || e.involves_us)
        .collect();
    let hidden = entries.len() - shown.len();
    let width = shown.iter().map(|e| e.name.len()).max().unwrap_or(4).max(4);
    writeln!(
        out,
        "{:width$}  CELL  {:7}  {:9}  REASON",
        "NAME", "ACTION", "AVAILABLE"
    )?;
    for e in &shown {
        let detail = e
            .detail
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        writeln!(
            out,
            "{:width$}  {:<4}  {:7}  {:9}  {}{detail}",
            e.name,
            e.cell.to_string(),
            e.action.verb(),
            e.available,
            e.reason
        )?;
        for line in e.detail_lines() {
            writeln!(out, "    {line}")?;
        }
    }
    if hidden > 0 {
        writeln!(
            out,
            "{hidden} APIServices not ours, left alone; --all lists them"
        )?;
    }
    let sent = entries
        .iter()
        .filter(|e| e.dry_run != DryRun::NotSent)
        .count();
    let refused = entries
        .iter()
        .filter(|e| matches!(e.dry_run, DryRun::Refused(_)))
        .count();
    if args.dry_run {
        writeln!(
            out,
            "dry run (--dry-run=server): {sent} writes sent with dryRun=All, {} accepted, {refused} refused",
            sent - refused
        )?;
    } else {
        writeln!(out, "dry run: none (--dry-run=none): the server was not asked whether it accepts these writes")?;
    }
    let summary: Vec<String> = counts(entries)
        .iter()
        .map(|(v, n)| format!("{n} {v}"))
        .collect();
    writeln!(
        out,
        "plan: {}",
        if summary.is_empty() {
            "nothing to do".to_string()
        } else {
            summary.join(", ")
        }
    )
}

fn print_json(args: &PlanArgs, entries: &[Entry]) {
    let shown: Vec<Value> = entries
        .iter()
        .filter(|e| args.all || e.involves_us)
        .map(Entry::to_json)
        .collect();
    let refused = entries
        .iter()
        .filter(|e| matches!(e.dry_run, DryRun::Refused(_)))
        .count();
    let doc = json!({
        "dryRun": dry_run_mode(args),
        "items": shown,
        "notOursHidden": entries.iter().filter(|e| !args.all && !e.involves_us).count(),
        "summary": counts(entries),
        "refused": refused,
    });
    match serde_json::to_string_pretty(&doc) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("autoregister: cannot encode the plan: {e}"),
    }
}

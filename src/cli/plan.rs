//! `autoregister plan`: what `run` would do for every name, writing nothing.

use std::collections::{BTreeMap, BTreeSet};

use autoregister::api::{APIService, Resource};
use autoregister::client::{Api, Canceller};
use autoregister::controller::load;
use autoregister::controller::{decide, Action, Current, Facts};
use autoregister::runtime::reflector::list_all;
use crossbeam_channel::RecvTimeoutError;

use super::args::PlanArgs;
use super::plan_availability as availability;
use super::{connect, exit, Failure};

/// Beyond `--timeout`, how long the whole plan may take (several pages of a list).
const PLAN_SLACK: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs `plan`; returns the exit code.
pub fn plan(args: &PlanArgs) -> Result<i32, Failure> {
    let o = &args.ownership;
    if let Some(w) = o.upstream_key_warning() {
        eprintln!("autoregister: warning: {w}");
    }
    let ownership = o.ownership();
    let desired = load(&args.manifests, &ownership.label_key).map_err(Failure::usage)?;
    let client = connect::client(&args.kube)?.with_timeout(args.timeout);
    // `--timeout` bounds every request (an exec plugin run included), and, with a little
    // slack so a single hung request reports its own cause first, the whole plan.
    let cancel = Canceller::new();
    let timer = {
        let cancel = cancel.clone();
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
        let timeout = args.timeout.saturating_add(PLAN_SLACK);
        std::thread::Builder::new()
            .name("plan-timeout".into())
            .spawn(move || {
                // Dropping the sender (the list finished) ends the wait without cancelling.
                if done_rx.recv_timeout(timeout) == Err(RecvTimeoutError::Timeout) {
                    cancel.cancel();
                }
            })
            .map(|_| done_tx)
            .map_err(|e| Failure::failed(format!("cannot start the timeout thread: {e}")))?
    };
    let api: Api<APIService> = Api::all(client.clone().with_canceller(&cancel));
    let listed = list_all(&api, 500, None, &cancel);
    drop(timer);
    let existing: BTreeMap<String, APIService> = match listed {
        // `None`: cancelled (the timeout), not an empty cluster.
        Ok(Some(listed)) => listed
            .items
            .into_iter()
            .map(|o| (o.name().to_string(), o))
            .collect(),
        Ok(None) => {
            return Err(Failure::failed(format!(
                "cannot list APIServices: no answer within {:?} (--timeout)",
                args.timeout
            )))
        }
        Err(e) if e.is_cancelled() => {
            return Err(Failure::failed(format!(
                "cannot list APIServices: no answer within {:?} (--timeout)",
                args.timeout
            )))
        }
        Err(e) => return Err(Failure::failed(format!("cannot list APIServices: {e}"))),
    };
    let names: BTreeSet<&String> = desired.keys().chain(existing.keys()).collect();
    // Desired names with no object: a running instance may hold them withdrawn.
    let absent: Vec<&str> = desired
        .keys()
        .filter(|n| !existing.contains_key(*n))
        .map(String::as_str)
        .collect();
    let withdrawn = match availability::withdrawn(&client, &cancel, &absent) {
        Ok(w) => w,
        Err(e) => {
            eprintln!(
                "autoregister: cannot tell which APIServices are withdrawn (listing Events: {e})"
            );
            BTreeMap::new()
        }
    };
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let width = names.iter().map(|n| n.len()).max().unwrap_or(4).max(4);
    println!(
        "{:width$}  CELL  {:7}  {:9}  REASON",
        "NAME", "ACTION", "AVAILABLE"
    );
    for name in names {
        let current = existing
            .get(name)
            .map_or(Current::NotFound, Current::Present);
        // As if `run` started now: nothing synced yet, everything listed is present at start.
        let d = decide(
            &ownership,
            &Facts {
                desired: desired.get(name),
                current,
                synced_once: false,
                present_at_start: existing.contains_key(name),
                desired_set_empty: desired.is_empty(),
                withdrawal: Default::default(),
            },
        );
        let verb = d.action.verb();
        *counts.entry(verb).or_default() += 1;
        let detail = match &d.action {
            Action::Blocked(why) => format!(": {why}"),
            _ => String::new(),
        };
        let current = existing.get(name);
        println!(
            "{name:width$}  {:<4}  {verb:7}  {:9}  {}{detail}",
            d.cell.to_string(),
            availability::column(current, &ownership),
            d.reason
        );
        if let Some(why) = availability::detail(current, &ownership) {
            println!("    {why}");
        }
        if let Some(note) = withdrawn.get(name.as_str()) {
            println!("    withdrawn by a running instance: {note}");
        }
    }
    let summary: Vec<String> = counts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    println!(
        "plan: {}",
        if summary.is_empty() {
            "nothing to do".to_string()
        } else {
            summary.join(", ")
        }
    );
    Ok(exit::OK)
}

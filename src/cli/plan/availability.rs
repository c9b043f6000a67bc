//! What `plan` says about availability: an AVAILABLE column for our APIServices, and for a
//! desired name that is absent, whether a running instance withdrew it and why (from its
//! latest Event: withdrawal is remembered by the running process only).

use std::collections::BTreeMap;

use autoregister::api::{APIService, Event};
use autoregister::client::{Api, Canceller, Client};
use autoregister::controller::availability::Observed;
use autoregister::controller::{EventReason, Ownership};
use autoregister::runtime::reflector::list_all;

/// The AVAILABLE cell: `True`, `False`, `Unknown` for an object of ours, `-` otherwise.
pub(crate) fn column(current: Option<&APIService>, ownership: &Ownership) -> &'static str {
    match current {
        Some(o) if ownership.is_managed(o) => match Observed::of(o) {
            Observed::Available { .. } => "True",
            Observed::Unavailable { .. } => "False",
            Observed::Unknown => "Unknown",
        },
        _ => "-",
    }
}

/// Why an object of ours is unavailable, for the line under its row.
pub(crate) fn detail(current: Option<&APIService>, ownership: &Ownership) -> Option<String> {
    let o = current.filter(|o| ownership.is_managed(o))?;
    let observed = Observed::of(o);
    observed.is_unavailable().then(|| observed.to_string())
}

/// For each of `absent` (desired names with no object), the note of a `Withdrawn` Event
/// newer than any `Restored` or `Registered` one: a running instance holds it withdrawn.
/// `Err` when the Events cannot be listed (the plan says so and goes on).
pub(crate) fn withdrawn(
    client: &Client,
    cancel: &Canceller,
    absent: &[&str],
) -> Result<BTreeMap<String, String>, String> {
    if absent.is_empty() {
        return Ok(BTreeMap::new());
    }
    // APIServices are cluster-scoped: their Events are in `default`.
    let api: Api<Event> = Api::namespaced(client.clone().with_canceller(cancel), "default");
    let listed = match list_all(&api, 500, None, cancel) {
        Ok(Some(l)) => l.items,
        Ok(None) => return Err("no answer within --timeout".into()),
        Err(e) => return Err(e.to_string()),
    };
    let mut latest: BTreeMap<&str, &Event> = BTreeMap::new();
    for e in &listed {
        let name = e.regarding.name.as_str();
        let relevant = [
            EventReason::Withdrawn,
            EventReason::Restored,
            EventReason::Registered,
        ]
        .iter()
        .any(|r| r.as_str() == e.reason);
        if !relevant || e.regarding.kind != "APIService" || !absent.contains(&name) {
            continue;
        }
        // RFC 3339 times of one format sort as strings.
        if latest
            .get(name)
            .is_none_or(|prev| prev.event_time <= e.event_time)
        {
            latest.insert(name, e);
        }
    }
    // Inserted one by one: `collect` would compile a sort for this map's entries.
    let mut withdrawn = BTreeMap::new();
    for (n, e) in latest {
        if e.reason == EventReason::Withdrawn.as_str() {
            withdrawn.insert(n.to_string(), e.note.clone());
        }
    }
    Ok(withdrawn)
}

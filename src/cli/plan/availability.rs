//! What `plan` says about availability: an AVAILABLE column for our APIServices, and for a
//! desired name that is absent, whether a running instance withdrew it and why, and which
//! names a running instance is fighting another writer over (from their latest Events:
//! both are remembered by the running process only).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use autoregister::api::time::parse_rfc3339;
use autoregister::api::{APIService, Event};
use autoregister::client::{Api, Canceller, Client};
use autoregister::controller::availability::Observed;
use autoregister::controller::{EventReason, Ownership, FIGHT_WINDOW};
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

/// The Events a running instance recorded on APIServices (they are cluster-scoped: their
/// Events are in `default`). `Err` when they cannot be listed (the plan says so and goes on).
pub(crate) fn events(client: &Client, cancel: &Canceller) -> Result<Vec<Event>, String> {
    let api: Api<Event> = Api::namespaced(client.clone().with_canceller(cancel), "default");
    match list_all(&api, 500, None, cancel) {
        Ok(Some(l)) => Ok(l
            .items
            .into_iter()
            .filter(|e| e.regarding.kind == "APIService")
            .collect()),
        Ok(None) => Err("no answer within --timeout".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// For each of `absent` (desired names with no object), the note of a `Withdrawn` Event
/// newer than any `Restored` or `Registered` one: a running instance holds it withdrawn.
pub(crate) fn withdrawn(events: &[Event], absent: &[&str]) -> BTreeMap<String, String> {
    let mut latest: BTreeMap<&str, &Event> = BTreeMap::new();
    for e in events {
        let name = e.regarding.name.as_str();
        let relevant = [
            EventReason::Withdrawn,
            EventReason::Restored,
            EventReason::Registered,
        ]
        .iter()
        .any(|r| r.as_str() == e.reason);
        if !relevant || !absent.contains(&name) {
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
    withdrawn
}

/// Names a running instance reported in a fight within the last [`FIGHT_WINDOW`] (it
/// reports a fight that goes on once per window): when, and the latest `FieldFight`
/// Event's note, which names the fields, the other writer and the pace.
pub(crate) fn fights(events: &[Event], now: SystemTime) -> BTreeMap<String, (String, String)> {
    let since = now.checked_sub(FIGHT_WINDOW).unwrap_or(UNIX_EPOCH);
    let mut latest: BTreeMap<&str, &Event> = BTreeMap::new();
    for e in events {
        let recent = parse_rfc3339(&e.event_time).is_some_and(|t| t >= since);
        if e.reason != EventReason::FieldFight.as_str() || !recent {
            continue;
        }
        let name = e.regarding.name.as_str();
        if latest
            .get(name)
            .is_none_or(|prev| prev.event_time <= e.event_time)
        {
            latest.insert(name, e);
        }
    }
    let mut fights = BTreeMap::new();
    for (n, e) in latest {
        fights.insert(n.to_string(), (e.event_time.clone(), e.note.clone()));
    }
    fights
}

//! Our writes of declared fields: what our last apply says about the next one (our own
//! not yet seen, or a put-back of what someone undid, paced in a fight), the takeover of
//! `managedFields` and the apply itself, and the report of a fight over fields.

use std::time::{Duration, Instant};

use log::{debug, warn};

use super::decision::{Action, Apply};
use super::events::EventReason;
use super::fields::{self, Applied, Takeover};
use super::fights::FIGHT_WINDOW;
use super::state::LastApply;
use super::sync::SyncContext;
use crate::api::{
    APIService, APIServiceSpec, Extra, FieldPath, ObjectMeta, Resource, ServiceReference, Status,
};
use crate::client::{Error, ListParams};

/// How long our own apply may take to show in the cache before the same apply is sent
/// again: past this, a cache that still shows the object it was decided on is not our
/// watch lagging behind.
pub(crate) const APPLY_UNSEEN_FOR: Duration = Duration::from_secs(30);

/// ` [spec.caBundle; releases metadata.labels["x"]]`: what an apply changes, for its log line.
pub(crate) fn describe(a: &Apply) -> String {
    let list = |paths: &[FieldPath]| {
        paths
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (a.differs.is_empty(), a.released.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!(" [{}]", list(&a.differs)),
        (true, false) => format!(" [releases {}]", list(&a.released)),
        (false, false) => format!(" [{}; releases {}]", list(&a.differs), list(&a.released)),
    }
}

/// Server-side apply of `a`, after moving the ownership it takes over into our apply
/// entry: a JSON patch of `managedFields` guarded by the resourceVersion, as kubectl's
/// `csaupgrade` sends it, so that the apply can release what older writes of ours (or an
/// adopted object's writers) own.
pub(crate) fn send(
    cx: &SyncContext<'_>,
    name: &str,
    a: &Apply,
    taken_over: &mut Option<Box<str>>,
) -> Result<(), Error> {
    if a.takeover != Takeover::None {
        *taken_over = take_over(cx, name, a)?;
    }
    cx.api.apply_unread(&a.config, true)
}

/// Moves ownership as `a.takeover` says; answers the resourceVersion it wrote, if it did.
fn take_over(cx: &SyncContext<'_>, name: &str, a: &Apply) -> Result<Option<Box<str>>, Error> {
    // Read by a list of that one name: the cache has no managedFields, and the grant to
    // list is there already (one to get would be for this read alone).
    let live = cx
        .api
        .list(&ListParams {
            field_selector: Some(format!("metadata.name={name}")),
            ..Default::default()
        })?
        .items
        .into_iter()
        .find(|o| o.name() == name);
    let Some(live) = live else {
        return Err(Error::from_status(Status::failure(
            404,
            "NotFound",
            format!("{name} was deleted since it was read"),
        )));
    };
    if live.metadata.uid != a.config.metadata.uid {
        // Replaced since the decision: its watch event decides the name again.
        return Err(Error::from_status(Status::failure(
            409,
            "Conflict",
            format!("{name} was replaced by another object since it was read"),
        )));
    }
    let Some(entries) = live.metadata.managed_fields.as_ref().map(|m| m.to_value()) else {
        return Ok(None);
    };
    let declared = Applied::from_config(a.config.clone()).declared();
    let Some(list) = fields::takeover(
        &entries,
        &cx.ownership.field_manager,
        &declared,
        a.takeover,
        &APIService::api_version(),
    ) else {
        return Ok(None);
    };
    let ops = serde_json::json!([
        {"op": "replace", "path": "/metadata/managedFields", "value": list},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": live.metadata.resource_version},
    ]);
    let patched = cx.api.json_patch(name, &ops)?;
    debug!(
        "{name}: ownership moved into our apply entry ({})",
        match a.takeover {
            Takeover::Adoption => "adoption",
            _ => "our update entry",
        }
    );
    Ok(patched.metadata.resource_version)
}

/// What an applied configuration sets, hashed (not the UID an apply carries, which names
/// the object, not a field). Every write computes it, so it hashes the typed fields
/// rather than their JSON (writing that text cost as much as the request body's). Every
/// field is named below, so a field added to the types does not compile until it is
/// hashed or said not to be. foldhash with a fixed seed: a fingerprint compared within
/// the process, never stored.
pub(crate) fn config_fingerprint(config: &APIService) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let APIService {
        api_version,
        kind,
        metadata,
        spec,
        status: _,
        extra: _,
    } = config;
    let ObjectMeta {
        name,
        labels,
        annotations,
        extra: meta_extra,
        namespace: _,
        uid: _,
        resource_version: _,
        generation: _,
        creation_timestamp: _,
        deletion_timestamp: _,
        managed_fields: _,
        field_owners: _,
    } = metadata;
    let APIServiceSpec {
        service,
        group,
        version,
        insecure_skip_tls_verify,
        ca_bundle,
        group_priority_minimum,
        version_priority,
        extra: spec_extra,
    } = spec;
    let mut h = foldhash::quality::FixedState::default().build_hasher();
    (api_version, kind, name).hash(&mut h);
    for map in [labels, annotations] {
        map.as_ref().map(|m| m.len()).hash(&mut h);
        for pair in map.iter().flatten() {
            pair.hash(&mut h);
        }
    }
    match service {
        Some(ServiceReference {
            namespace,
            name,
            port,
            extra,
        }) => (true, namespace, name, port, extra_text(extra)).hash(&mut h),
        None => false.hash(&mut h),
    }
    (group, version, insecure_skip_tls_verify, ca_bundle).hash(&mut h);
    (group_priority_minimum, version_priority).hash(&mut h);
    (extra_text(meta_extra), extra_text(spec_extra)).hash(&mut h);
    h.finish()
}

/// Unknown fields as JSON text, to hash (usually there are none).
fn extra_text(extra: &Extra) -> Option<String> {
    (!extra.is_empty()).then(|| serde_json::to_string(&**extra).unwrap_or_default())
}

/// A put-back of declared fields someone else changed (`contest`, their writers from
/// `managedFields`): counted and paced (the next put-back waits); when it amounts to a
/// fight, reported once by log line and Warning Event `FieldFight`, naming the fields and
/// the other writers.
pub(crate) fn fight_over_fields(
    cx: &SyncContext<'_>,
    name: &str,
    uid: Option<&str>,
    contest: &Contest,
) {
    let contested = cx.fights.contested_write(name, Instant::now());
    let Some(fight) = contested.fight else {
        return;
    };
    let note = format!(
        "{}; {}",
        field_fight_note(&contest.fields, &contest.by),
        fight_pace_note(contested.pace, cx.fights.max_pace())
    );
    warn!(
        "{name}: FieldFight: {note} ({} writes within {}s putting it back)",
        fight.writes,
        FIGHT_WINDOW.as_secs()
    );
    cx.report
        .events
        .record(name, uid, EventReason::FieldFight, &note);
}

/// `putting it back after 80ms, doubling to every 30s while the fight goes on`: how a
/// fight is paced, for its report.
pub(crate) fn fight_pace_note(pace: Duration, max: Duration) -> String {
    use crate::text::duration;
    if pace >= max {
        format!(
            "putting it back every {} while the fight goes on",
            duration(max)
        )
    } else {
        format!(
            "putting it back after {}, doubling to every {} while the fight goes on",
            duration(pace),
            duration(max)
        )
    }
}

/// `spec.caBundle is also written by cainjector; remove it from the manifest or the
/// injector's annotation`.
pub(crate) fn field_fight_note(fields: &[String], others: &[String]) -> String {
    let what = if fields.is_empty() {
        "a declared field".to_string()
    } else {
        fields.join(", ")
    };
    let verb = if fields.len() > 1 { "are" } else { "is" };
    let who = if others.is_empty() {
        "another writer".to_string()
    } else {
        others.join(" and ")
    };
    let remedy = if fields.iter().all(|f| f == "spec.caBundle") && !fields.is_empty() {
        "remove it from the manifest or the injector's annotation".to_string()
    } else {
        format!(
            "remove {} from the manifest or stop {who} writing {}",
            if fields.len() > 1 { "them" } else { "it" },
            if fields.len() > 1 { "them" } else { "it" },
        )
    };
    format!("{what} {verb} also written by {who}; {remedy}")
}

/// What our last apply to a name says about this write.
pub(crate) struct Prior {
    /// The cached object's resourceVersion the write is decided on.
    pub(crate) cached_rv: Option<Box<str>>,
    /// What the write sends, hashed (a create sends the configuration an apply would; a
    /// delete is [`DELETED`]).
    pub(crate) written: Option<u64>,
    /// The same write as our last, to an object that changed (or went, or came back)
    /// since: someone undid it.
    pub(crate) put_back: bool,
}

/// The fingerprint a delete leaves as our last write to a name: a delete again after it
/// means the object came back. (A configuration's hash is 0 with odds of 2^-64.)
const DELETED: u64 = 0;

/// Why a write is not sent now.
pub(crate) enum NotNow {
    /// Our last apply has not reached the cache yet: the same write again would be one the
    /// server already has.
    Unseen,
    /// A put-back inside its fight's pace: decide again after this long.
    Paced(Duration),
}

/// What our last apply says about `action`, decided on `cached` (the cached object the
/// decision read: the cache may have moved on since).
pub(crate) fn prior(
    cx: &SyncContext<'_>,
    name: &str,
    action: &Action,
    cached: Option<&APIService>,
) -> Result<Prior, NotNow> {
    let cached_rv = cached.and_then(|o| o.metadata.resource_version.clone());
    let written = match action {
        Action::Create(o) => Some(config_fingerprint(o)),
        Action::Update(a) | Action::Adopt(a) => Some(config_fingerprint(&a.config)),
        Action::Delete { .. } => Some(DELETED),
        _ => None,
    };
    let applying = matches!(action, Action::Update(_) | Action::Adopt(_));
    let last = cx.state.last_apply(name);
    if let (true, Some(last)) = (applying, &last) {
        if last.based_on.contains(&cached_rv) && last.at.elapsed() < APPLY_UNSEEN_FOR {
            return Err(NotNow::Unseen);
        }
    }
    // Redoing what another writer undid is paced within a fight: a field put back, a create
    // of what we created (someone deleted it), a delete of what we deleted (someone created
    // it back). Two instances with different manifests otherwise trade creates and deletes
    // as fast as the watch brings them. A manifest change is a different write: not paced.
    let put_back = matches!(
        action,
        Action::Update(_) | Action::Create(_) | Action::Delete { .. }
    ) && cx.state.synced_once(name)
        && written.is_some()
        && last.map(|l| l.fingerprint) == written;
    if put_back {
        if let Some(wait) = cx.fights.wait_before_put_back(name, Instant::now()) {
            return Err(NotNow::Paced(wait));
        }
    }
    Ok(Prior {
        cached_rv,
        written,
        put_back,
    })
}

/// The fields a put-back restores, and the other managers that own them now.
pub(crate) struct Contest {
    /// The fields, as `spec.caBundle`.
    pub(crate) fields: Vec<String>,
    /// Their other owners, from `managedFields`.
    pub(crate) by: Vec<String>,
}

/// For a put-back: what it restores and from whom (read before the apply makes it ours).
pub(crate) fn contest(
    cx: &SyncContext<'_>,
    name: &str,
    action: &Action,
    prior: &Prior,
) -> Option<Contest> {
    let Action::Update(a) = action else {
        return None;
    };
    if !prior.put_back {
        return None;
    }
    let by = cx
        .store
        .get(name)
        .and_then(|o| o.metadata.field_ownership())
        .map(|o| {
            fields::others_owning(&o, &a.differs, &cx.ownership.field_manager)
                .into_iter()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Some(Contest {
        fields: a.differs.iter().map(ToString::to_string).collect(),
        by,
    })
}

/// Remembers a successful create or apply of `name` (`taken_over`: the resourceVersion
/// our takeover wrote just before the apply).
pub(crate) fn note_written(
    cx: &SyncContext<'_>,
    name: &str,
    prior: &Prior,
    taken_over: Option<Box<str>>,
) {
    if let Some(fp) = prior.written {
        cx.state.note_applied(
            name,
            LastApply {
                fingerprint: fp,
                based_on: vec![prior.cached_rv.clone(), taken_over],
                at: Instant::now(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::APIServiceSpec;

    #[test]
    fn a_configurations_fingerprint_is_what_it_sets_not_its_uid() {
        let spec = APIServiceSpec {
            group: "a.io".into(),
            version: "v1".into(),
            version_priority: 10,
            ..Default::default()
        };
        let mut a = APIService::new("v1.a.io", spec.clone());
        a.metadata.set_label("k", "v");
        a.metadata
            .extra
            .insert("finalizers".into(), serde_json::json!(["x/y"]));
        let fp = config_fingerprint(&a);
        let mut same = a.clone();
        same.metadata.uid = Some("u".into());
        same.metadata.resource_version = Some("7".into());
        assert_eq!(config_fingerprint(&same), fp, "the UID names the object");
        type Change = (&'static str, fn(&mut APIService));
        let changes: [Change; 9] = [
            ("a spec field", |o| o.spec.version_priority = 11),
            ("a label", |o| o.metadata.set_label("k", "w")),
            ("a label added", |o| o.metadata.set_label("k2", "v")),
            ("an annotation", |o| {
                o.metadata.annotations = Some([("a".to_string(), "b".to_string())].into())
            }),
            ("a finalizer", |o| {
                o.metadata
                    .extra
                    .insert("finalizers".into(), serde_json::json!(["x/z"]));
            }),
            ("the CA bundle", |o| {
                o.spec.ca_bundle = Some(Box::from(&b"ca"[..]))
            }),
            ("a service", |o| {
                o.spec.service = Some(crate::api::ServiceReference {
                    name: "s".into(),
                    ..Default::default()
                })
            }),
            ("an unknown spec field", |o| {
                o.spec.extra.insert("x".into(), serde_json::json!(1));
            }),
            ("the name", |o| o.metadata.name = Some("v1.b.io".into())),
        ];
        for (what, change) in changes {
            let mut other = a.clone();
            change(&mut other);
            assert_ne!(config_fingerprint(&other), fp, "{what}");
        }
        // Labels and annotations are hashed apart: the same pair in the other map differs.
        let mut moved = a.clone();
        moved.metadata.labels = None;
        moved.metadata.annotations = a.metadata.labels.clone();
        assert_ne!(config_fingerprint(&moved), fp);
    }
}

//! `metadata.managedFields` reduced to who owns which field: what decisions about field
//! ownership read (server-side apply), without the times and encoding around it.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// A field's path as `fieldsV1` spells it, one segment per level: `["f:spec",
/// "f:caBundle"]` (`k:`/`v:`/`i:` segments kept as written).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldPath(pub Vec<String>);

impl FieldPath {
    /// The path of a field given by its JSON keys: `["spec", "caBundle"]`.
    pub fn of_keys<'a>(keys: impl IntoIterator<Item = &'a str>) -> FieldPath {
        FieldPath(keys.into_iter().map(|k| format!("f:{k}")).collect())
    }

    /// Whether `self` is `other` or a field inside it.
    pub fn is_within(&self, other: &FieldPath) -> bool {
        self.0.starts_with(&other.0)
    }

    /// The JSON keys of the path, when every segment names a field (`f:`).
    pub fn keys(&self) -> Option<Vec<&str>> {
        self.0.iter().map(|s| s.strip_prefix("f:")).collect()
    }
}

impl fmt::Display for FieldPath {
    /// `spec.caBundle`; `metadata.labels["a/b"]` for a label or annotation key; other
    /// segments in brackets as written.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map_keys = false;
        for (i, seg) in self.0.iter().enumerate() {
            match seg.strip_prefix("f:") {
                Some(k) if map_keys => write!(f, "[{k:?}]")?,
                Some(k) if i == 0 => f.write_str(k)?,
                Some(k) => write!(f, ".{k}")?,
                None => write!(f, "[{seg}]")?,
            }
            map_keys = i == 1
                && self.0[0] == "f:metadata"
                && matches!(seg.as_str(), "f:labels" | "f:annotations");
        }
        Ok(())
    }
}

/// How a manager wrote its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Server-side apply: the entry is exactly what the manager applied last.
    Apply,
    /// Any other write (create, update, patch): the fields it changed.
    Update,
}

/// One manager's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerEntry {
    /// The `fieldManager`.
    pub manager: Box<str>,
    /// `Apply` or `Update`.
    pub operation: Operation,
    /// The subresource it wrote through (`status`), if any.
    pub subresource: Option<Box<str>>,
    /// The fields it owns, sorted: every leaf, and every node marked `.` (owned itself).
    /// Shared between entries with the same `fieldsV1` (see [`FieldOwnership::parse_text`]).
    pub fields: Arc<[FieldPath]>,
}

impl OwnerEntry {
    /// Whether this entry owns `path`, a field inside it, or a field around it (a map or
    /// struct owned whole).
    pub fn touches(&self, path: &FieldPath) -> bool {
        self.fields
            .iter()
            .any(|f| f.is_within(path) || path.is_within(f))
    }
}

/// `metadata.managedFields` as field ownership: the entries (main resource and
/// subresources), and the managers by their latest write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldOwnership {
    /// Managers, most recent write first, each once.
    managers: Box<[Box<str>]>,
    entries: Box<[OwnerEntry]>,
}

impl FieldOwnership {
    /// Reads a `managedFields` list. An entry that cannot be read (not an object, no
    /// manager, an unknown operation, a field set that is not one) is left out and logged
    /// at debug: it only ever names a writer, and a server never sends one.
    pub fn parse(managed: &Value) -> FieldOwnership {
        let mut timed: Vec<(&str, Box<str>)> = Vec::new();
        let mut entries = Vec::new();
        for (i, e) in managed.as_array().into_iter().flatten().enumerate() {
            let manager = e.get("manager").and_then(Value::as_str);
            let time = e.get("time").and_then(Value::as_str).unwrap_or("");
            if let Some(m) = manager {
                timed.push((time, m.into()));
            }
            match entry(e) {
                Ok(entry) => entries.push(entry),
                Err(why) => log::debug!("managedFields entry {i} ignored: {why}"),
            }
        }
        by_time(timed, entries)
    }

    /// [`parse`](Self::parse) of `managedFields` as the server sent it (JSON text), without
    /// building its tree: each watch event of an APIService carries one, and as a `Value`
    /// then walked it was ~7 % of the controller's CPU converging 1,000 (benches/README.md).
    /// Entries are read in place, and each distinct `fieldsV1` text is walked once (objects
    /// written by the same managers the same way carry the same text). Text that does not
    /// have the expected shape goes through `parse`, which says what it skipped.
    pub fn parse_text(text: &str) -> FieldOwnership {
        #[derive(Deserialize)]
        struct Raw<'a> {
            #[serde(borrow, default)]
            manager: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            operation: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            subresource: Option<Cow<'a, str>>,
            #[serde(borrow, default)]
            time: Option<Cow<'a, str>>,
            #[serde(borrow, default, rename = "fieldsV1")]
            fields: Option<&'a RawValue>,
        }
        let slow = || FieldOwnership::parse(&serde_json::from_str(text).unwrap_or(Value::Null));
        let Ok(raw) = serde_json::from_str::<Vec<Raw<'_>>>(text) else {
            return slow();
        };
        let mut timed: Vec<(&str, Box<str>)> = Vec::new();
        let mut entries = Vec::with_capacity(raw.len());
        for e in &raw {
            let Some(manager) = e.manager.as_deref() else {
                return slow();
            };
            timed.push((e.time.as_deref().unwrap_or(""), manager.into()));
            let operation = match e.operation.as_deref() {
                Some("Apply") => Operation::Apply,
                Some("Update") => Operation::Update,
                _ => return slow(),
            };
            let Some(fields) = cached_fields(e.fields.map_or("null", RawValue::get)) else {
                return slow();
            };
            entries.push(OwnerEntry {
                manager: manager.into(),
                operation,
                subresource: e
                    .subresource
                    .as_deref()
                    .filter(|s| !s.is_empty())
                    .map(Box::from),
                fields,
            });
        }
        by_time(timed, entries)
    }

    /// The managers, most recent write first.
    pub fn managers(&self) -> impl Iterator<Item = &str> {
        self.managers.iter().map(|m| &**m)
    }

    /// Whether `other` records the same ownership of the main resource: subresource entries
    /// (kube-aggregator's `status` writes) and the managers' order by time aside.
    pub fn same_on_main_resource(&self, other: &FieldOwnership) -> bool {
        fn main(o: &FieldOwnership) -> impl Iterator<Item = &OwnerEntry> {
            o.entries.iter().filter(|e| e.subresource.is_none())
        }
        self.entries == other.entries || main(self).eq(main(other))
    }

    /// Every entry.
    pub fn entries(&self) -> &[OwnerEntry] {
        &self.entries
    }

    /// `manager`'s entry for `operation` on the main resource.
    pub fn entry(&self, manager: &str, operation: Operation) -> Option<&OwnerEntry> {
        self.entries
            .iter()
            .find(|e| &*e.manager == manager && e.operation == operation && e.subresource.is_none())
    }

    /// The managers other than `except` whose entry on the main resource touches `path`
    /// (see [`OwnerEntry::touches`]), each once.
    pub fn owners_of(&self, path: &FieldPath, except: &str) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for e in self.entries.iter() {
            if e.subresource.is_none()
                && &*e.manager != except
                && e.touches(path)
                && !out.contains(&&*e.manager)
            {
                out.push(&e.manager);
            }
        }
        out
    }
}

/// The summary of `entries` with its managers ordered by `timed` (time, manager).
fn by_time(mut timed: Vec<(&str, Box<str>)>, entries: Vec<OwnerEntry>) -> FieldOwnership {
    // RFC 3339 times in UTC sort as strings; the stable sort keeps the server's order on ties.
    timed.sort_by(|a, b| b.0.cmp(a.0));
    let mut managers: Vec<Box<str>> = Vec::new();
    for (_, m) in timed {
        if !managers.contains(&m) {
            managers.push(m);
        }
    }
    FieldOwnership {
        managers: managers.into(),
        entries: entries.into(),
    }
}

/// A `fieldsV1` text and the paths it owns.
type Walked = (Box<str>, Arc<[FieldPath]>);

/// The owned paths of one `fieldsV1` text (`null`: none), from the last [`MAX_SHARED`]
/// distinct texts when it is one of them; `None` when it is not a field set.
fn cached_fields(text: &str) -> Option<Arc<[FieldPath]>> {
    static SEEN: Mutex<Vec<Walked>> = Mutex::new(Vec::new());
    if let Some((_, f)) = SEEN.lock().iter().find(|(t, _)| &**t == text) {
        return Some(f.clone());
    }
    let value: Value = serde_json::from_str(text).ok()?;
    let fields = fields_of(&value).ok()?;
    let mut seen = SEEN.lock();
    if seen.len() >= MAX_SHARED {
        seen.remove(0);
    }
    seen.push((text.into(), fields.clone()));
    Some(fields)
}

/// The owned paths of a `fieldsV1` value, sorted, each once.
fn fields_of(v: &Value) -> Result<Arc<[FieldPath]>, String> {
    let mut fields = Vec::new();
    match v {
        Value::Null => {}
        v => walk(v, &mut Vec::new(), &mut fields)?,
    }
    fields.sort();
    fields.dedup();
    Ok(fields.into())
}

/// One entry, or why it cannot be read.
fn entry(e: &Value) -> Result<OwnerEntry, String> {
    let manager = e
        .get("manager")
        .and_then(Value::as_str)
        .ok_or("no manager")?;
    let operation = match e.get("operation").and_then(Value::as_str) {
        Some("Apply") => Operation::Apply,
        Some("Update") => Operation::Update,
        other => return Err(format!("operation {other:?} is neither Apply nor Update")),
    };
    let subresource = e
        .get("subresource")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(Box::from);
    let fields = fields_of(e.get("fieldsV1").unwrap_or(&Value::Null))?;
    Ok(OwnerEntry {
        manager: manager.into(),
        operation,
        subresource,
        fields,
    })
}

/// The owned paths of a `fieldsV1` node: its empty children (leaves) and `.`-marked nodes.
fn walk(node: &Value, at: &mut Vec<String>, out: &mut Vec<FieldPath>) -> Result<(), String> {
    let m = node
        .as_object()
        .ok_or_else(|| format!("fieldsV1 at {} is not an object", FieldPath(at.clone())))?;
    if m.is_empty() && !at.is_empty() {
        out.push(FieldPath(at.clone()));
    }
    for (k, v) in m {
        if k == "." {
            if !at.is_empty() {
                out.push(FieldPath(at.clone()));
            }
            continue;
        }
        at.push(k.clone());
        walk(v, at, out)?;
        at.pop();
    }
    Ok(())
}

/// Distinct summaries kept for sharing: objects written by the same managers the same
/// way (thousands of APIServices from one manifest set) share one copy.
const MAX_SHARED: usize = 32;

static SHARED: Mutex<Vec<Arc<FieldOwnership>>> = Mutex::new(Vec::new());

/// `managedFields` texts last summarized, newest first: objects written in the same second
/// by the same managers the same way carry the same text (hundreds a second while a
/// manifest set is created, and again as kube-aggregator writes their status), and reading
/// it again was a tenth of a watch event's cost.
const MAX_RECENT: usize = 8;

static RECENT: Recent = Recent(Mutex::new(Vec::new()));

/// Texts summarized last, with their summaries, newest first.
struct Recent(Mutex<Vec<(Box<str>, Arc<FieldOwnership>)>>);

impl Recent {
    /// The summary of `text`: the one kept for it, else a new one, kept.
    fn summary(&self, text: &str) -> Arc<FieldOwnership> {
        if let Some((_, o)) = self.0.lock().iter().find(|(t, _)| same_text(t, text)) {
            return o.clone();
        }
        let o = shared(FieldOwnership::parse_text(text));
        let mut recent = self.0.lock();
        recent.insert(0, (text.into(), o.clone()));
        recent.truncate(MAX_RECENT);
        o
    }
}

/// Whether `a` and `b` are the same text, compared eight bytes at a time: these texts run
/// to kilobytes and usually differ only late (a timestamp), and musl's `memcmp`, which `==`
/// calls in the static binary, compares a byte at a time.
fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let word = |c: &[u8]| <[u8; 8]>::try_from(c).map(u64::from_ne_bytes).ok();
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    a8.remainder() == b8.remainder() && a8.zip(b8).all(|(x, y)| word(x) == word(y))
}

/// The shared summary of the `managedFields` text `text` (see [`MAX_RECENT`], [`shared`]).
pub(crate) fn shared_text(text: &str) -> Arc<FieldOwnership> {
    RECENT.summary(text)
}

/// A shared copy of `o` (see [`MAX_SHARED`]).
pub(crate) fn shared(o: FieldOwnership) -> Arc<FieldOwnership> {
    let mut all = SHARED.lock();
    if let Some(found) = all.iter().find(|s| ***s == o) {
        return found.clone();
    }
    let new = Arc::new(o);
    if all.len() < MAX_SHARED {
        all.push(new.clone());
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(keys: &[&str]) -> FieldPath {
        FieldPath::of_keys(keys.iter().copied())
    }

    #[test]
    fn entries_leaves_and_dot_members_are_read_and_broken_entries_skipped() {
        let o = FieldOwnership::parse(&json!([
            {"manager": "autoregister", "operation": "Apply", "time": "2026-01-01T00:00:00Z",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:a/b": {}}},
                          "f:spec": {"f:group": {}, "f:service": {".": {}, "f:name": {}}}}},
            {"manager": "cainjector", "operation": "Update", "time": "2026-01-02T00:00:00Z",
             "fieldsV1": {"f:spec": {"f:caBundle": {}}}},
            {"manager": "kube-apiserver", "operation": "Update", "subresource": "status",
             "time": "2026-01-03T00:00:00Z", "fieldsV1": {"f:status": {"f:conditions": {}}}},
            {"manager": "broken", "operation": "Update", "fieldsV1": {"f:spec": 3}},
            {"manager": "odd", "operation": "Replace"},
            7
        ]));
        assert_eq!(
            o.managers().collect::<Vec<_>>(),
            [
                "kube-apiserver",
                "cainjector",
                "autoregister",
                "broken",
                "odd"
            ]
        );
        assert_eq!(o.entries().len(), 3);
        let ours = o.entry("autoregister", Operation::Apply).unwrap();
        assert_eq!(
            ours.fields
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "metadata.labels[\"a/b\"]",
                "spec.group",
                "spec.service",
                "spec.service.name"
            ]
        );
        assert_eq!(
            o.owners_of(&path(&["spec", "caBundle"]), "autoregister"),
            ["cainjector"]
        );
        // The status subresource's entry does not own the main resource's fields.
        assert!(o
            .owners_of(&path(&["status", "conditions"]), "x")
            .is_empty());
        // A struct owned whole touches its fields, and a field its struct.
        assert_eq!(
            o.owners_of(&path(&["spec", "service", "port"]), "x"),
            ["autoregister"]
        );
        assert!(o.entry("autoregister", Operation::Update).is_none());
    }

    #[test]
    fn anything_but_a_list_is_no_entry_and_no_panic() {
        for v in [json!(null), json!({}), json!("x"), json!([[]])] {
            assert_eq!(FieldOwnership::parse(&v).entries().len(), 0);
        }
    }

    #[test]
    fn equal_summaries_share_one_copy() {
        let v = json!([{"manager": "share-test", "operation": "Apply", "fieldsV1": {"f:spec": {"f:x": {}}}}]);
        let a = shared(FieldOwnership::parse(&v));
        let b = shared(FieldOwnership::parse(&v));
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn reading_the_text_gives_what_reading_the_tree_gives() {
        let status = json!({"manager": "kube-apiserver", "operation": "Update",
            "subresource": "status", "time": "2026-01-03T00:00:00Z",
            "fieldsV1": {"f:status": {"f:conditions": {".": {}, "k:{\"type\":\"Available\"}": {}}}}});
        let ours = json!({"manager": "autoregister", "operation": "Apply",
            "time": "2026-01-01T00:00:00Z",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:a/b": {}}},
                         "f:spec": {"f:group": {}, "f:service": {".": {}, "f:name": {}}}}});
        let cases = [
            json!([ours, status]),
            // The same fieldsV1 again (from the cache), and no fieldsV1 at all.
            json!([status, ours, {"manager": "m", "operation": "Update", "fieldsV1": null}]),
            // Broken entries take the tree's path, which skips them.
            json!([ours, {"manager": "broken", "operation": "Update", "fieldsV1": {"f:spec": 3}},
                   {"manager": "odd", "operation": "Replace"}, {"operation": "Apply"}, 7]),
            json!(null),
            json!({}),
        ];
        for v in cases {
            let text = v.to_string();
            assert_eq!(
                FieldOwnership::parse_text(&text),
                FieldOwnership::parse(&v),
                "{text}"
            );
        }
        assert_eq!(
            FieldOwnership::parse_text("not json"),
            FieldOwnership::default()
        );
    }

    #[test]
    fn texts_are_the_same_only_when_every_byte_is() {
        let a = "0123456789abcdefXYZ";
        assert!(same_text(a, a));
        assert!(same_text("", ""));
        for (i, c) in a.char_indices() {
            let mut b = a.to_string();
            b.replace_range(i..i + 1, if c == '_' { "-" } else { "_" });
            assert!(!same_text(a, &b), "byte {i}");
        }
        assert!(!same_text(a, &a[..18]));
    }

    #[test]
    fn a_text_read_again_is_not_parsed_again_and_a_new_one_is() {
        let text = |time: &str| {
            format!(
                r#"[{{"manager":"m-recent","operation":"Update","time":"{time}","fieldsType":"FieldsV1","fieldsV1":{{"f:spec":{{"f:group":{{}}}}}}}}]"#
            )
        };
        // A cache of its own: the process-wide one is shared with tests running beside.
        let recent = Recent(Mutex::new(Vec::new()));
        let first = recent.summary(&text("2026-01-01T00:00:00Z"));
        let again = recent.summary(&text("2026-01-01T00:00:00Z"));
        assert!(Arc::ptr_eq(&first, &again));
        // Found, not parsed and kept again.
        assert_eq!(recent.0.lock().len(), 1);
        assert_eq!(
            *first,
            FieldOwnership::parse_text(&text("2026-01-01T00:00:00Z"))
        );
        let other = recent.summary(r#"[{"manager":"m-recent","operation":"Apply","fieldsV1":{}}]"#);
        assert_eq!(other.managers().collect::<Vec<_>>(), ["m-recent"]);
        assert_ne!(*other, *first);
        assert_eq!(recent.0.lock().len(), 2);
    }
}

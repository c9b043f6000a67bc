//! The desired set read from PATH, re-read while running without losing what
//! worked: a file that stops parsing keeps the objects it last contributed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::parse::duplicate_error;
use super::{manifest_files, parse_file, read_manifest, Manifest, ManifestError};
use crate::controller::Desired;

/// The outcome of reading PATH.
#[derive(Debug)]
pub struct Reload {
    /// The effective desired set, by name.
    pub desired: BTreeMap<String, Desired>,
    /// What is wrong on disk; the affected objects kept their previous state.
    pub errors: Vec<ManifestError>,
}

/// Remembers, per file, the objects it contributed at the last reload.
#[derive(Debug)]
pub struct ManifestSet {
    path: PathBuf,
    label_key: String,
    files: BTreeMap<PathBuf, Vec<Manifest>>,
}

impl ManifestSet {
    /// An empty set for PATH whose modes come from `label_key` (see [`parse_file`]);
    /// nothing is read until [`reload`](Self::reload).
    pub fn new(path: impl Into<PathBuf>, label_key: &str) -> ManifestSet {
        ManifestSet {
            path: path.into(),
            label_key: label_key.to_string(),
            files: BTreeMap::new(),
        }
    }

    /// The file or directory this set reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads PATH again. A file that fails to read or parse keeps its last good
    /// objects (none if it never parsed); a file gone from PATH drops its objects;
    /// a name declared in two files stays with the file that had it before (else
    /// the first file by name) and the other declaration is an error. When PATH
    /// itself cannot be listed, nothing changes.
    pub fn reload(&mut self) -> Reload {
        let files = match manifest_files(&self.path) {
            Ok(files) => files,
            Err(e) => {
                return Reload {
                    desired: self.desired(),
                    errors: vec![e],
                }
            }
        };
        let mut errors = Vec::new();
        let candidates: Vec<(PathBuf, Vec<Manifest>)> = files
            .into_iter()
            .map(|file| {
                let parsed = read_manifest(&file)
                    .map_err(|e| vec![ManifestError::file(&file, e)])
                    .and_then(|text| parse_file(&file, &text, &self.label_key));
                let manifests = match parsed {
                    Ok(manifests) => manifests,
                    Err(errs) => {
                        errors.extend(errs);
                        self.files.get(&file).cloned().unwrap_or_default()
                    }
                };
                (file, manifests)
            })
            .collect();
        let owners = self.owners(&candidates, &mut errors);
        let mut kept: BTreeMap<PathBuf, Vec<Manifest>> = BTreeMap::new();
        for (fi, (file, manifests)) in candidates.into_iter().enumerate() {
            let mut own: Vec<Manifest> = manifests
                .into_iter()
                .enumerate()
                .filter(|(mi, m)| owners.get(m.name()) == Some(&(fi, *mi)))
                .map(|(_, m)| m)
                .collect();
            // Collected in place: without this the parse's doubled capacity (up to
            // twice the entries, 64 bytes each) stays allocated for as long as the set.
            own.shrink_to_fit();
            kept.insert(file, own);
        }
        self.files = kept;
        Reload {
            desired: self.desired(),
            errors,
        }
    }

    /// Which declaration wins each name, as (file index, manifest index).
    fn owners(
        &self,
        candidates: &[(PathBuf, Vec<Manifest>)],
        errors: &mut Vec<ManifestError>,
    ) -> BTreeMap<String, (usize, usize)> {
        let mut owners = BTreeMap::new();
        // The file that had a name keeps it, so an edit elsewhere cannot steal it.
        for (fi, (file, manifests)) in candidates.iter().enumerate() {
            let before = self.files.get(file);
            for (mi, m) in manifests.iter().enumerate() {
                if before.is_some_and(|b| b.iter().any(|p| p.name() == m.name())) {
                    owners.insert(m.name().to_string(), (fi, mi));
                }
            }
        }
        for (fi, (_, manifests)) in candidates.iter().enumerate() {
            for (mi, m) in manifests.iter().enumerate() {
                match owners.get(m.name()) {
                    None => {
                        owners.insert(m.name().to_string(), (fi, mi));
                    }
                    Some(&(of, om)) if (of, om) != (fi, mi) => {
                        errors.push(duplicate_error(m, &candidates[of].1[om]));
                    }
                    Some(_) => {}
                }
            }
        }
        owners
    }

    /// The effective desired set, by name.
    pub fn desired(&self) -> BTreeMap<String, Desired> {
        // Inserted one by one: `collect` would compile a sort for this map's entries.
        let mut out = BTreeMap::new();
        for m in self.manifests() {
            out.insert(m.name().to_string(), m.desired.clone());
        }
        out
    }

    /// Every object in effect, with where it was declared, by file then position.
    pub fn manifests(&self) -> impl Iterator<Item = &Manifest> {
        self.files.values().flatten()
    }
}

/// Reads PATH once; any error fails the whole load (for `plan` and start-up).
///
/// PATH is a file or a directory of `*.yaml`, `*.yml` and `*.json` files, checked as the
/// `autoregister` binary checks its manifests; `label_key` is the ownership label whose
/// value `onstart` asks for a sync on start. Errors name the file, the line and the field.
///
/// # Example
///
/// ```
/// use autoregister::{load_manifests, Controller, SyncMode};
/// # let dir = std::env::temp_dir().join(format!("autoregister-doc-load-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # std::fs::write(dir.join("local.yaml"), "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.example.com\n  labels: {example.com/registered-by: onstart}\nspec: {group: example.com, version: v1, groupPriorityMinimum: 1000, versionPriority: 15}\n")?;
///
/// let desired = load_manifests(&dir, "example.com/registered-by")
///     .map_err(|errors| format!("{errors:?}"))?;
/// assert_eq!(desired["v1.example.com"].mode, SyncMode::OnStart);
/// # let register = |c: &Controller| {
/// // Handed to a controller by mode:
/// for entry in desired.values() {
///     match entry.mode {
///         SyncMode::OnStart => c.add_api_service_to_sync_on_start(entry.object.clone()),
///         _ => c.add_api_service_to_sync(entry.object.clone()),
///     }
/// }
/// # };
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn load(path: &Path, label_key: &str) -> Result<BTreeMap<String, Desired>, Vec<ManifestError>> {
    let reload = ManifestSet::new(path, label_key).reload();
    if reload.errors.is_empty() {
        Ok(reload.desired)
    } else {
        Err(reload.errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DEFAULT_LABEL_KEY;
    use crate::controller::manifests::testutil::TempDir;
    use std::fs;

    impl ManifestSet {
        fn default_key(path: impl Into<PathBuf>) -> ManifestSet {
            ManifestSet::new(path, DEFAULT_LABEL_KEY)
        }
    }

    fn load(path: &Path) -> Result<BTreeMap<String, Desired>, Vec<ManifestError>> {
        super::load(path, DEFAULT_LABEL_KEY)
    }

    /// A valid APIService `name` (`v1.GROUP`), told apart from other versions by `marker`.
    fn svc(name: &str, marker: &str) -> String {
        let group = name.trim_start_matches("v1.");
        format!(
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {name}\n  annotations:\n    m: {marker}\nspec:\n  group: {group}\n  version: v1\n  groupPriorityMinimum: 1\n  versionPriority: 1\n"
        )
    }

    fn marker(d: &Desired) -> &str {
        d.object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("m"))
            .unwrap_or_default()
    }

    fn names(desired: &BTreeMap<String, Desired>) -> Vec<&str> {
        desired.keys().map(String::as_str).collect()
    }

    #[test]
    fn parse_error_keeps_last_good_objects() {
        let d = TempDir::new("set-keep");
        d.write("a.yaml", &svc("v1.a", "a"));
        let mut set = ManifestSet::default_key(d.dir());
        assert!(set.reload().errors.is_empty());
        d.write("a.yaml", &format!("{}  oops: [\n", svc("v1.a", "changed")));
        let r = set.reload();
        assert_eq!(r.errors.len(), 1);
        assert_eq!(r.errors[0].file, d.path("a.yaml"));
        assert_eq!(names(&r.desired), ["v1.a"]);
        assert_eq!(
            marker(&r.desired["v1.a"]),
            "a",
            "the old object, not half an edit"
        );
        d.write("a.yaml", &svc("v1.a", "fixed"));
        let r = set.reload();
        assert!(r.errors.is_empty());
        assert_eq!(marker(&r.desired["v1.a"]), "fixed");
    }

    #[test]
    fn new_file_that_fails_contributes_nothing() {
        let d = TempDir::new("set-newbad");
        d.write("a.yaml", &svc("v1.a", "a"));
        let mut set = ManifestSet::default_key(d.dir());
        set.reload();
        d.write(
            "b.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n",
        );
        let r = set.reload();
        assert_eq!(names(&r.desired), ["v1.a"]);
        assert_eq!(r.errors.len(), 1);
        assert_eq!((r.errors[0].document, r.errors[0].line), (Some(1), Some(1)));
    }

    #[test]
    fn removed_file_drops_its_objects() {
        let d = TempDir::new("set-removed");
        d.write("a.yaml", &svc("v1.a", "a"));
        let b = d.write("b.yaml", &svc("v1.b", "b"));
        let mut set = ManifestSet::default_key(d.dir());
        assert_eq!(names(&set.reload().desired), ["v1.a", "v1.b"]);
        fs::remove_file(b).unwrap();
        let r = set.reload();
        assert!(r.errors.is_empty());
        assert_eq!(names(&r.desired), ["v1.a"]);
    }

    #[test]
    fn unlistable_path_changes_nothing() {
        let d = TempDir::new("set-gone");
        let sub = d.path("m");
        fs::create_dir(&sub).unwrap();
        fs::write(sub.join("a.yaml"), svc("v1.a", "a")).unwrap();
        let mut set = ManifestSet::default_key(&sub);
        set.reload();
        fs::remove_dir_all(&sub).unwrap();
        let r = set.reload();
        assert_eq!(names(&r.desired), ["v1.a"]);
        assert_eq!(r.errors[0].file, sub);
    }

    #[test]
    fn duplicate_across_files_names_both_locations() {
        let d = TempDir::new("set-dup");
        d.write("a.yaml", &svc("v1.x", "a"));
        d.write(
            "b.yaml",
            &format!("{}---\n{}", svc("v1.b", "b"), svc("v1.x", "b")),
        );
        let errs = load(d.dir()).unwrap_err();
        assert_eq!(errs.len(), 1);
        let e = &errs[0];
        assert_eq!(
            (&e.file, e.document, e.line),
            (&d.path("b.yaml"), Some(2), Some(13))
        );
        let first = format!("{}:1 (document 1)", d.path("a.yaml").display());
        assert!(e.message.contains(&first), "{e}");
    }

    #[test]
    fn duplicate_within_a_file_names_both_locations() {
        let d = TempDir::new("set-dup1");
        let f = d.write(
            "a.yaml",
            &format!("{}---\n{}", svc("v1.x", "a"), svc("v1.x", "b")),
        );
        let errs = load(&f).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!((errs[0].document, errs[0].line), (Some(2), Some(13)));
        assert!(
            errs[0].message.contains("a.yaml:1 (document 1)"),
            "{}",
            errs[0]
        );
    }

    #[test]
    fn edit_introducing_a_duplicate_keeps_the_existing_owner() {
        let d = TempDir::new("set-dup-edit");
        // b.yaml owns v1.x; a.yaml, first by name, later declares it too.
        d.write("a.yaml", &svc("v1.a", "a"));
        d.write("b.yaml", &svc("v1.x", "from-b"));
        let mut set = ManifestSet::default_key(d.dir());
        assert!(set.reload().errors.is_empty());
        d.write(
            "a.yaml",
            &format!("{}---\n{}", svc("v1.a", "a2"), svc("v1.x", "from-a")),
        );
        let r = set.reload();
        assert_eq!(names(&r.desired), ["v1.a", "v1.x"]);
        assert_eq!(marker(&r.desired["v1.x"]), "from-b");
        assert_eq!(
            marker(&r.desired["v1.a"]),
            "a2",
            "the rest of the edit applies"
        );
        assert_eq!(r.errors.len(), 1);
        assert_eq!(r.errors[0].file, d.path("a.yaml"));
        assert!(r.errors[0].message.contains("b.yaml:1"), "{}", r.errors[0]);
        // Once b.yaml lets go of the name, a.yaml's declaration takes effect.
        d.write("b.yaml", "");
        let r = set.reload();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(marker(&r.desired["v1.x"]), "from-a");
    }

    #[test]
    fn moving_an_object_between_files() {
        let d = TempDir::new("set-move");
        d.write("a.yaml", &svc("v1.x", "x"));
        let mut set = ManifestSet::default_key(d.dir());
        set.reload();
        d.write("b.yaml", &svc("v1.x", "x"));
        d.write("a.yaml", "");
        let r = set.reload();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(names(&r.desired), ["v1.x"]);
        let owner: Vec<_> = set.manifests().map(|m| m.file.to_path_buf()).collect();
        assert_eq!(owner, [d.path("b.yaml")]);
    }

    #[test]
    fn unreadable_file_is_reported_and_keeps_last_good() {
        let d = TempDir::new("set-unread");
        d.write("a.yaml", &svc("v1.a", "a"));
        let mut set = ManifestSet::default_key(d.dir());
        set.reload();
        fs::write(d.path("a.yaml"), [0xff, 0xfe, 0x00]).unwrap();
        let r = set.reload();
        assert_eq!(names(&r.desired), ["v1.a"]);
        assert!(
            r.errors[0].message.starts_with("cannot read"),
            "{}",
            r.errors[0]
        );
    }
}

//! A directory updated the way the kubelet updates a ConfigMap volume (its `AtomicWriter`):
//!
//! ```text
//! dir/..2026_01_02_03_04_05.000000001/a.yaml   the payload, one timestamped dir per version
//! dir/..data -> ..2026_01_02_03_04_05.000000001  swapped atomically (rename of ..data_tmp)
//! dir/a.yaml -> ..data/a.yaml                  the user-visible names, symlinks
//! ```
//!
//! Use from a test crate with `#[path = "support/configmap.rs"] mod configmap;`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

/// A ConfigMap volume in `dir`.
pub struct ConfigMapDir {
    pub dir: PathBuf,
    version: u32,
    current: Option<String>,
    keys: Vec<String>,
}

impl ConfigMapDir {
    /// An empty volume at `dir` (created).
    pub fn new(dir: PathBuf) -> ConfigMapDir {
        std::fs::create_dir_all(&dir).unwrap();
        ConfigMapDir {
            dir,
            version: 0,
            current: None,
            keys: Vec::new(),
        }
    }

    /// Publishes `data` (key → file content) as the new version, as the kubelet does:
    /// write a new timestamped dir, flip `..data`, fix the top-level links, remove the old dir.
    pub fn publish(&mut self, data: &BTreeMap<String, String>) {
        self.version += 1;
        let ts = format!("..2026_01_02_03_04_05.{:09}", self.version);
        let payload = self.dir.join(&ts);
        std::fs::create_dir(&payload).unwrap();
        for (key, text) in data {
            std::fs::write(payload.join(key), text).unwrap();
        }
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        symlink(&ts, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
        for key in data.keys() {
            let link = self.dir.join(key);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(format!("..data/{key}"), &link).unwrap();
            }
        }
        for old in &self.keys {
            if !data.contains_key(old) {
                std::fs::remove_file(self.dir.join(old)).unwrap();
            }
        }
        if let Some(prev) = self.current.replace(ts) {
            std::fs::remove_dir_all(self.dir.join(prev)).unwrap();
        }
        self.keys = data.keys().cloned().collect();
    }
}

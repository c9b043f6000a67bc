//! Test helpers: throwaway directories.

use std::fs;
use std::path::{Path, PathBuf};

/// A fresh empty directory in the system temp dir, removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    /// `tag` keeps parallel tests apart.
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("autoregister-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Path of `name` inside.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `name` with `text`.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        fs::write(&p, text).unwrap();
        p
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

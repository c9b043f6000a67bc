//! Which files PATH stands for, and a cheap fingerprint of their state.

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use super::ManifestError;

const EXTENSIONS: &[&str] = &["yaml", "yml", "json"];

/// PATH itself when it is a file; otherwise its `*.yaml`, `*.yml`, `*.json`
/// entries, not recursively, without dotfiles, sorted by name.
///
/// Symlinks are followed: a ConfigMap volume is a directory of symlinks into
/// `..data/`, which the dotfile rule skips. An entry that is not a file (a
/// directory named `x.yaml`, a dangling symlink) stays in the list so that reading
/// it reports an error and keeps its last good objects instead of looking removed.
pub fn manifest_files(path: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let meta = fs::metadata(path).map_err(|e| ManifestError::file(path, e.to_string()))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = fs::read_dir(path).map_err(|e| ManifestError::file(path, e.to_string()))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ManifestError::file(path, e.to_string()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let wanted = !name.starts_with('.')
            && Path::new(name)
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.contains(&e));
        if wanted {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// A number that changes when a manifest file is added, removed, resized or
/// modified (names, sizes, modification times); cheap enough to poll every second.
pub fn fingerprint(path: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    match manifest_files(path) {
        Ok(files) => {
            for file in files {
                file.hash(&mut h);
                match fs::metadata(&file) {
                    Ok(m) => {
                        m.len().hash(&mut h);
                        m.modified().ok().hash(&mut h);
                        // A rename over the file (editors, ConfigMap updates) gives a new inode.
                        #[cfg(unix)]
                        std::os::unix::fs::MetadataExt::ino(&m).hash(&mut h);
                    }
                    Err(e) => e.kind().hash(&mut h),
                }
            }
        }
        Err(e) => e.message.hash(&mut h),
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::manifests::testutil::TempDir;

    #[test]
    fn directory_listing_filters_and_sorts() {
        let d = TempDir::new("list");
        for name in [
            "b.yml",
            "a.yaml",
            "c.json",
            ".hidden.yaml",
            "notes.txt",
            "README",
            "x.YAML",
        ] {
            fs::write(d.0.join(name), "").unwrap();
        }
        fs::create_dir(d.0.join("sub.yaml")).unwrap();
        fs::create_dir(d.0.join("..data")).unwrap();
        fs::write(d.0.join("..data/inner.yaml"), "").unwrap();
        let names: Vec<_> = manifest_files(&d.0)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.yaml", "b.yml", "c.json", "sub.yaml"]);
    }

    #[test]
    fn a_file_path_is_taken_whatever_its_name() {
        let d = TempDir::new("single");
        let f = d.0.join("manifest.txt");
        fs::write(&f, "").unwrap();
        assert_eq!(manifest_files(&f).unwrap(), vec![f]);
    }

    #[test]
    fn missing_path_is_an_error_naming_it() {
        let p = Path::new("/nonexistent/autoregister/manifests");
        let e = manifest_files(p).unwrap_err();
        assert_eq!(e.file, p);
    }

    #[test]
    fn fingerprint_changes_with_files() {
        let d = TempDir::new("fp");
        let f0 = fingerprint(&d.0);
        assert_eq!(fingerprint(&d.0), f0, "stable when nothing changes");
        fs::write(d.0.join("a.yaml"), "a").unwrap();
        let f1 = fingerprint(&d.0);
        assert_ne!(f1, f0, "file added");
        fs::write(d.0.join("a.yaml"), "ab").unwrap();
        let f2 = fingerprint(&d.0);
        assert_ne!(f2, f1, "file grown");
        fs::write(d.0.join(".a.yaml.swp"), "x").unwrap();
        assert_eq!(fingerprint(&d.0), f2, "ignored files do not count");
        fs::write(d.0.join("b.tmp"), "cd").unwrap();
        fs::rename(d.0.join("b.tmp"), d.0.join("a.yaml")).unwrap();
        assert_ne!(fingerprint(&d.0), f2, "same size, replaced by rename");
        fs::remove_file(d.0.join("a.yaml")).unwrap();
        assert_eq!(fingerprint(&d.0), f0, "back to empty");
    }
}

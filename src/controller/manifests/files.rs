//! Which files PATH stands for, and a cheap fingerprint of their state.

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Read;
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
    crate::sort::sort(&mut files);
    Ok(files)
}

/// Largest manifest file read; a bigger one is an error (it is not a hand-written list of
/// APIServices, and reading it whole could exhaust memory).
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// `O_NONBLOCK` on Linux (the same on every Linux architecture): a FIFO swapped in between
/// the type check and the open then opens without waiting for a writer.
#[cfg(target_os = "linux")]
const O_NONBLOCK: i32 = 0o4000;

/// Reads a manifest file as text; only a regular file (after following symlinks) is read.
///
/// A FIFO, socket or device would block the reload (a FIFO's `open` waits for a writer) or
/// never end, so its type is checked first. The check and the open are two steps: a file
/// replaced by a FIFO in between is opened non-blocking (Linux) and refused by the second
/// check, made on the opened file itself.
pub fn read_manifest(path: &Path) -> Result<String, String> {
    let meta = fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    check_regular(&meta)?;
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(target_os = "linux")]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, O_NONBLOCK);
    let file = options
        .open(path)
        .map_err(|e| format!("cannot read: {e}"))?;
    check_regular(&file.metadata().map_err(|e| format!("cannot read: {e}"))?)?;
    // Reserved at the size the file says (capped), so reading up to the limit does not
    // double and copy the buffer on the way: a 50 MB file peaks at ~25 MB RSS, not ~41 MB.
    let hint = meta.len().min(MAX_MANIFEST_BYTES) + 1;
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(format!("larger than {MAX_MANIFEST_BYTES} bytes; not read"));
    }
    String::from_utf8(bytes).map_err(|e| format!("cannot read: not UTF-8 text ({e})"))
}

fn check_regular(meta: &fs::Metadata) -> Result<(), String> {
    if meta.is_file() {
        return Ok(());
    }
    let t = meta.file_type();
    #[cfg(unix)]
    let kind = {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else if t.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        }
    };
    #[cfg(not(unix))]
    let kind = if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    };
    Err(format!("{kind}; only regular files are read"))
}

/// A number that changes when a manifest file is added, removed, resized or
/// modified (names, sizes, modification times); cheap enough to poll every second.
pub fn fingerprint(path: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    match manifest_files(path) {
        Ok(files) => {
            for file in files {
                file.hash(&mut h);
                // Where the symlinks lead: a ConfigMap update flips `..data` to a new
                // timestamped directory, which changes this even when sizes, times and
                // (reused) inode numbers do not.
                fs::canonicalize(&file).ok().hash(&mut h);
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

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = TempDir::new("fifo");
        let fifo = d.0.join("d.yaml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("no mkfifo here; skipped");
            return;
        }
        let e = read_manifest(&fifo).unwrap_err();
        assert!(e.contains("a FIFO"), "{e}");
        assert_eq!(
            manifest_files(&d.0).unwrap(),
            vec![fifo],
            "listed, so its error is reported"
        );
        fs::write(d.0.join("a.yaml"), "x").unwrap();
        assert_eq!(read_manifest(&d.0.join("a.yaml")).unwrap(), "x");
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

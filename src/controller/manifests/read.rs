//! Reading one manifest file, bounded: a file over the limit (or a symlink to
//! `/dev/zero`) is refused after at most the limit plus one byte, never slurped.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::ManifestError;

/// The largest manifest file accepted: 16 MiB. The API server stores an object in at
/// most ~1.5 MiB (etcd's request limit), so this holds thousands of APIServices while
/// keeping the parse's peak memory (a few times the file) well under 100 MB.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// The text of `file`, refused past `limit` bytes (at most `limit + 1` bytes are read)
/// or when it is not UTF-8.
pub fn read_manifest(file: &Path, limit: u64) -> Result<String, ManifestError> {
    let f = File::open(file).map_err(|e| ManifestError::file(file, format!("cannot read: {e}")))?;
    // Reserve what a regular file says it holds (anything else, e.g. /dev/zero, says 0:
    // reserve the limit, which costs address space, not memory, until read), so the
    // buffer never doubles and copies on the way to the limit.
    let hint = match f.metadata() {
        Ok(m) if m.is_file() => m.len().min(limit) + 1,
        _ => limit.saturating_add(1),
    };
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    f.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| ManifestError::file(file, format!("cannot read: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(ManifestError::file(
            file,
            format!("file is over the limit of {limit} bytes for a manifest file; split it"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        ManifestError::file(file, format!("cannot read: not UTF-8 ({})", e.utf8_error()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::manifests::testutil::TempDir;

    #[test]
    fn a_file_at_the_limit_is_read_and_one_byte_more_is_refused() {
        let d = TempDir::new("read-limit");
        d.write("a.yaml", "# 1234567\n");
        let f = d.dir().join("a.yaml");
        assert_eq!(read_manifest(&f, 10).unwrap(), "# 1234567\n");
        let e = read_manifest(&f, 9).unwrap_err();
        assert!(e.message.contains("over the limit of 9 bytes"), "{e}");
    }

    #[test]
    fn an_endless_file_is_refused_after_the_limit() {
        let e = read_manifest(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.message.contains("over the limit"), "{e}");
    }

    #[test]
    fn invalid_utf8_is_refused_naming_the_cause() {
        let d = TempDir::new("read-utf8");
        std::fs::write(d.dir().join("b.yaml"), b"name: \xff\n").unwrap();
        let e = read_manifest(&d.dir().join("b.yaml"), 100).unwrap_err();
        assert!(e.message.contains("not UTF-8"), "{e}");
    }
}

//! A manifest error with its location.

use std::fmt;
use std::path::PathBuf;

/// Why a manifest was rejected, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    /// The file (or PATH itself when it cannot be listed).
    pub file: PathBuf,
    /// 1-based YAML document index within the file; none for JSON and whole-file errors.
    pub document: Option<usize>,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column of the offending key or value, when known.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl ManifestError {
    /// An error about the whole file (cannot read, not UTF-8, …).
    pub(super) fn file(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ManifestError {
            file: file.into(),
            document: None,
            line: None,
            column: None,
            message: message.into(),
        }
    }
}

/// `file:line:column: document N: message`, leaving out what is unknown.
impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if let Some(doc) = self.document {
            write!(f, ": document {doc}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ManifestError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_leaves_out_unknown_parts() {
        let mut e = ManifestError {
            file: "m/a.yaml".into(),
            document: Some(2),
            line: Some(14),
            column: Some(3),
            message: "bad".into(),
        };
        assert_eq!(e.to_string(), "m/a.yaml:14:3: document 2: bad");
        e.column = None;
        assert_eq!(e.to_string(), "m/a.yaml:14: document 2: bad");
        e.document = None;
        assert_eq!(e.to_string(), "m/a.yaml:14: bad");
        assert_eq!(
            ManifestError::file("m/b.json", "unreadable").to_string(),
            "m/b.json: unreadable"
        );
    }
}

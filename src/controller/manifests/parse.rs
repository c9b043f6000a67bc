//! One manifest file's text to the desired entries it declares.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::json_value::JsonValue;
use super::schema::Problem;
use super::{documents, locate, object, ManifestError};
use crate::controller::decision::manifest_mode;
use crate::controller::Desired;

/// One desired APIService and where it was declared.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// The entry and its mode.
    pub desired: Desired,
    /// File it came from (one allocation shared by every object of the file).
    pub file: Arc<Path>,
    /// 1-based YAML document index; none for JSON.
    pub document: Option<usize>,
    /// 1-based line where its document starts.
    pub line: usize,
}

impl Manifest {
    /// The APIService name.
    pub fn name(&self) -> &str {
        self.desired
            .object
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
    }

    /// `file:line (document N)`, for messages naming two places.
    pub fn location(&self) -> String {
        match self.document {
            Some(doc) => format!("{}:{} (document {doc})", self.file.display(), self.line),
            None => format!("{}:{}", self.file.display(), self.line),
        }
    }
}

/// One document's text and where it sits in its file, to place a problem at its field.
struct Source<'a> {
    /// The document's text (the whole file for JSON).
    text: &'a str,
    /// Lines of the file before `text`.
    offset: usize,
    /// JSON rather than YAML.
    json: bool,
    /// 1-based YAML document index; none for JSON.
    document: Option<usize>,
    /// 1-based line where the document starts.
    line: usize,
}

impl Source<'_> {
    /// `problem` at its field's line and column, or at the document's first line when the
    /// field cannot be found in the text.
    fn error(&self, file: &Path, problem: &Problem) -> ManifestError {
        let at = if problem.path.0.is_empty() {
            None
        } else if self.json {
            locate::in_json(self.text, &problem.path.0, problem.at_key)
        } else {
            locate::in_yaml(self.text, &problem.path.0, problem.at_key)
        };
        ManifestError {
            file: file.to_path_buf(),
            document: self.document,
            line: Some(at.map_or(self.line, |(l, _)| l + self.offset)),
            column: at.map(|(_, c)| c),
            message: problem.to_string(),
        }
    }
}

/// Files with at least this many YAML documents are parsed on two threads: parsing is the
/// largest fixed cost of a start (~5 µs a document: 10,000 manifests took ~50 ms before the
/// first request), and the machine is otherwise idle until the first request.
const PARALLEL_DOCUMENTS: usize = 512;

/// What part of a file declares: its objects and its errors, in document order.
#[derive(Default)]
struct Found {
    manifests: Vec<Manifest>,
    errors: Vec<ManifestError>,
}

impl Found {
    /// Turns one parsed document (or its error) into objects at once: only one document's
    /// `Value` tree is alive at a time (10,000 of them at once were most of a start's peak).
    fn take(
        &mut self,
        file: &Arc<Path>,
        label_key: &str,
        value: Result<Value, ManifestError>,
        src: &Source<'_>,
    ) {
        let value = match value {
            Ok(value) => value,
            Err(e) => {
                self.errors.push(e);
                return;
            }
        };
        for res in object::expand(value) {
            match res {
                Ok(obj) => {
                    let mode = manifest_mode(&obj, label_key);
                    self.manifests.push(Manifest {
                        desired: Desired::owned(obj, mode),
                        file: file.clone(),
                        document: src.document,
                        line: src.line,
                    });
                }
                Err(problems) => {
                    let mut located: Vec<ManifestError> =
                        problems.iter().map(|p| src.error(file, p)).collect();
                    // In the order of the text, as a user reads the file.
                    crate::sort::sort_by_key(&mut located, |e| (e.line, e.column));
                    self.errors.extend(located);
                }
            }
        }
    }

    /// Parses YAML documents in order.
    fn documents(
        mut self,
        file: &Arc<Path>,
        label_key: &str,
        docs: &[documents::Document],
    ) -> Self {
        for doc in docs {
            let value = yaml_to_json(&doc.text).map_err(|(line, message)| ManifestError {
                file: file.to_path_buf(),
                document: Some(doc.index),
                line: Some(line.map_or(doc.line, |l| l + doc.offset)),
                column: None,
                message,
            });
            let src = Source {
                text: &doc.text,
                offset: doc.offset,
                json: false,
                document: Some(doc.index),
                line: doc.line,
            };
            self.take(file, label_key, value, &src);
        }
        self
    }

    /// YAML documents on two threads when there are many (halves in order, so objects and
    /// errors keep document order), else on this one.
    fn documents_parallel(
        self,
        file: &Arc<Path>,
        label_key: &str,
        docs: &[documents::Document],
    ) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if docs.len() < PARALLEL_DOCUMENTS || cores < 2 {
            return self.documents(file, label_key, docs);
        }
        let (first, second) = docs.split_at(docs.len() / 2);
        std::thread::scope(|s| {
            let later = std::thread::Builder::new()
                .name("manifest-parse".into())
                .spawn_scoped(s, || Found::default().documents(file, label_key, second));
            let mut found = self.documents(file, label_key, first);
            // No thread to be had: this one parses the rest too.
            let rest = match later {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(_) => Found::default().documents(file, label_key, second),
            };
            found.manifests.extend(rest.manifests);
            found.errors.extend(rest.errors);
            found
        })
    }
}

/// Parses one file: JSON when its name ends in `.json`, YAML otherwise. Any error
/// (including a name declared twice in the file) rejects the whole file. An
/// object's mode comes from the ownership label `label_key` or, for manifests
/// written for upstream, kube-aggregator's label.
pub fn parse_file(
    file: &Path,
    text: &str,
    label_key: &str,
) -> Result<Vec<Manifest>, Vec<ManifestError>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let is_json = file.extension().is_some_and(|e| e == "json");
    let shared: Arc<Path> = file.into();
    let mut found = Found::default();
    if is_json {
        let mut src = Source {
            text,
            offset: 0,
            json: true,
            document: None,
            line: first_content_line(text),
        };
        match serde_json::from_slice::<Value>(text.as_bytes()) {
            Ok(doc) => found.take(&shared, label_key, Ok(doc), &src),
            Err(e) => {
                src.line = e.line();
                let err = ManifestError {
                    file: file.to_path_buf(),
                    document: None,
                    line: Some(e.line()),
                    column: Some(e.column()),
                    message: format!("invalid JSON: {e}"),
                };
                found.take(&shared, label_key, Err(err), &src)
            }
        }
    } else {
        found = found.documents_parallel(&shared, label_key, &documents::split(text));
    }
    let Found {
        manifests,
        mut errors,
    } = found;
    errors.extend(duplicates(&manifests));
    if errors.is_empty() {
        Ok(manifests)
    } else {
        Err(errors)
    }
}

/// Straight into a JSON value that refuses duplicate keys (see [`JsonValue`]). Aliases may
/// expand only so far (see `crate::yaml`).
fn yaml_to_json(text: &str) -> Result<Value, (Option<usize>, String)> {
    crate::yaml::from_str::<JsonValue>(text)
        .map(|v| v.0)
        .map_err(|e| (e.line, format!("invalid YAML: {e}")))
}

/// Names declared twice in one file.
fn duplicates(found: &[Manifest]) -> Vec<ManifestError> {
    let mut first: BTreeMap<&str, &Manifest> = BTreeMap::new();
    let mut errors = Vec::new();
    for m in found {
        if let Some(prev) = first.insert(m.name(), m) {
            errors.push(duplicate_error(m, prev));
            first.insert(m.name(), prev);
        }
    }
    errors
}

/// The error for `dup`, rejected because `owner` declares the same name.
pub(super) fn duplicate_error(dup: &Manifest, owner: &Manifest) -> ManifestError {
    ManifestError {
        file: dup.file.to_path_buf(),
        document: dup.document,
        line: Some(dup.line),
        column: None,
        message: format!(
            "duplicate APIService {:?}: already declared at {}",
            dup.name(),
            owner.location()
        ),
    }
}

fn first_content_line(text: &str) -> usize {
    let lead = text.len() - text.trim_start().len();
    text[..lead].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DEFAULT_LABEL_KEY;
    use crate::controller::SyncMode;

    fn parse_file(file: &Path, text: &str) -> Result<Vec<Manifest>, Vec<ManifestError>> {
        super::parse_file(file, text, DEFAULT_LABEL_KEY)
    }

    const A: &str = "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.a\nspec:\n  group: a\n  version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 10\n";

    #[test]
    fn yaml_error_line_is_a_line_of_the_file() {
        let text = format!("{A}---\n{A}  bad: [\n");
        let errs = parse_file(Path::new("x.yaml"), &text).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!((errs[0].document, errs[0].line), (Some(2), Some(21)));
        assert!(errs[0].message.starts_with("invalid YAML"), "{}", errs[0]);
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        let text = format!("{A}metadata:\n  name: v1.b\n");
        let errs = parse_file(Path::new("x.yaml"), &text).unwrap_err();
        assert!(
            errs[0]
                .message
                .contains("duplicate entry with key \"metadata\""),
            "{}",
            errs[0]
        );
        // The second `metadata:`, not the mapping holding it (where the parser points).
        assert_eq!(errs[0].line, Some(10));
    }

    #[test]
    fn error_lines_of_later_documents_and_control_characters_are_the_files() {
        // Document 2 starts on line 11; its `spec.version` is repeated on line 20 of the file.
        let text = format!("{A}---\n{A}  version: v2\n");
        let errs = parse_file(Path::new("x.yaml"), &text).unwrap_err();
        assert_eq!((errs[0].document, errs[0].line), (Some(2), Some(20)));
        let text = format!(
            "{A}---\n{}",
            A.replace("  version: v1\n", "  group: b\n  version: v1\n")
        );
        let errs = parse_file(Path::new("x.yaml"), &text).unwrap_err();
        assert_eq!(
            (errs[0].document, errs[0].line),
            (Some(2), Some(17)),
            "{}",
            errs[0]
        );
        let errs = parse_file(Path::new("x.yaml"), "kind: APIService\nx: a\u{0}b\n").unwrap_err();
        assert_eq!(errs[0].line, Some(2), "{}", errs[0]);
    }

    #[test]
    fn json_error_line() {
        let errs = parse_file(
            Path::new("x.json"),
            "{\n  \"kind\": \"APIService\",\n  oops\n}",
        )
        .unwrap_err();
        assert_eq!((errs[0].document, errs[0].line), (None, Some(3)));
    }

    #[test]
    fn byte_order_mark_is_ignored() {
        let text = format!("\u{feff}{A}");
        assert_eq!(parse_file(Path::new("x.yaml"), &text).unwrap().len(), 1);
    }

    #[test]
    fn mode_comes_from_the_label() {
        let on_start = A.replace(
            "  name: v1.a\n",
            "  name: v1.a\n  labels:\n    kube-aggregator.kubernetes.io/automanaged: onstart\n",
        );
        let got = parse_file(Path::new("x.yaml"), &on_start).unwrap();
        assert_eq!(got[0].desired.mode, SyncMode::OnStart);
        let other = on_start.replace("onstart", "\"false\"");
        let got = parse_file(Path::new("x.yaml"), &other).unwrap();
        assert_eq!(got[0].desired.mode, SyncMode::Always);
        let ours = A.replace(
            "  name: v1.a\n",
            &format!("  name: v1.a\n  labels:\n    {DEFAULT_LABEL_KEY}: onstart\n"),
        );
        let got = parse_file(Path::new("x.yaml"), &ours).unwrap();
        assert_eq!(got[0].desired.mode, SyncMode::OnStart, "our own key");
    }

    /// `n` documents naming `v1.g{i}` (9 lines each), as one file's text.
    fn many(n: usize) -> String {
        (0..n)
            .map(|i| {
                A.replace("v1.a", &format!("v1.g{i}"))
                    .replace("group: a", &format!("group: g{i}"))
            })
            .collect::<Vec<_>>()
            .join("---\n")
    }

    #[test]
    fn a_large_file_parsed_on_two_threads_keeps_document_order() {
        let n = PARALLEL_DOCUMENTS * 2 + 1;
        let got = parse_file(Path::new("x.yaml"), &many(n)).unwrap();
        let names: Vec<&str> = got.iter().map(Manifest::name).collect();
        let want: Vec<String> = (0..n).map(|i| format!("v1.g{i}")).collect();
        assert_eq!(names, want);
        let last = &got[n - 1];
        assert_eq!((last.document, last.line), (Some(n), 10 * (n - 1) + 1));
    }

    #[test]
    fn a_large_file_reports_errors_of_both_halves_in_order_and_duplicates_across_them() {
        let n = PARALLEL_DOCUMENTS * 2;
        let mut text = many(n);
        // Document 2 is broken; the last document names the first's APIService.
        text = text.replacen("  version: v1\n", "  version: [\n", 2);
        text = text.replacen("  version: [\n", "  version: v1\n", 1);
        text.push_str("---\n");
        text.push_str(&A.replace("v1.a", "v1.g0").replace("group: a", "group: g0"));
        let errs = parse_file(Path::new("x.yaml"), &text).unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].document, Some(2));
        assert!(errs[0].message.starts_with("invalid YAML"), "{}", errs[0]);
        assert_eq!(errs[1].document, Some(n + 1));
        assert!(
            errs[1].message.contains("duplicate APIService \"v1.g0\""),
            "{}",
            errs[1]
        );
    }
}

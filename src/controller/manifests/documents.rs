//! Splits a YAML stream into its documents, remembering where each starts.
//!
//! serde_yaml_ng iterates documents but does not say on which line one starts,
//! and errors about a document's *content* (wrong kind, no name) need that line.
//! A `---` or `...` at column 0 always is a document marker in YAML (it ends even
//! block and quoted scalars), so a line scan finds the same boundaries the parser
//! does.

/// One document of a YAML stream.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Document {
    /// 1-based index, counted as the parser counts documents.
    pub index: usize,
    /// 1-based line of the document's first content (or of its marker when empty).
    pub line: usize,
    /// The document's text.
    pub text: String,
    /// Lines of the file before `text`: a line `n` of `text` is line `offset + n` of the file.
    pub offset: usize,
}

/// `---` or `...` followed by the end of the line or a blank.
fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

/// Whether the line carries something besides blanks and comments.
fn has_content(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty() && !t.starts_with('#')
}

#[derive(Default)]
struct Chunk {
    /// 1-based line where the chunk starts.
    start: usize,
    /// Started by `---`: a document even when empty.
    explicit: bool,
    /// First line with content.
    content: Option<usize>,
    text: String,
}

/// The documents of `text`; a stretch without `---` and without content (e.g. a
/// leading comment) is no document, as for the parser.
pub(super) fn split(text: &str) -> Vec<Document> {
    let mut docs = Vec::new();
    let mut chunk = Chunk {
        start: 1,
        ..Default::default()
    };
    let finish = |chunk: Chunk, docs: &mut Vec<Document>| {
        if chunk.explicit || chunk.content.is_some() {
            // An offset, not padding with blank lines: padding made a file of n documents
            // cost O(n²) to parse.
            docs.push(Document {
                index: docs.len() + 1,
                line: chunk.content.unwrap_or(chunk.start),
                text: chunk.text,
                offset: chunk.start - 1,
            });
        }
    };
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let number = i + 1;
        if is_marker(line, "---") {
            finish(std::mem::take(&mut chunk), &mut docs);
            chunk = Chunk {
                start: number,
                explicit: true,
                content: has_content(&line[3..]).then_some(number),
                text: line.to_string(),
            };
        } else if is_marker(line, "...") {
            chunk.text.push_str(line);
            finish(std::mem::take(&mut chunk), &mut docs);
            chunk = Chunk {
                start: number + 1,
                ..Default::default()
            };
        } else if line.starts_with('%') {
            // A directive belongs to the next `---`; the parser sees a blank line
            // so that the chunk it ends up in still parses.
            chunk.text.push('\n');
        } else {
            if chunk.content.is_none() && has_content(line) {
                chunk.content = Some(number);
            }
            chunk.text.push_str(line);
        }
    }
    finish(chunk, &mut docs);
    docs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(text: &str) -> Vec<(usize, usize)> {
        split(text).iter().map(|d| (d.index, d.line)).collect()
    }

    #[test]
    fn single_document_without_marker() {
        assert_eq!(summary("# hi\n\na: 1\n"), vec![(1, 3)]);
    }

    #[test]
    fn leading_comment_before_marker_is_not_a_document() {
        assert_eq!(summary("# c\n---\na: 1\n---\nb: 2\n"), vec![(1, 3), (2, 5)]);
    }

    #[test]
    fn empty_documents_are_counted_like_the_parser() {
        let text = "# c\n---\n---\na: 1\n---\n";
        assert_eq!(summary(text), vec![(1, 2), (2, 4), (3, 5)]);
        let parsed = serde_yaml_ng::Deserializer::from_str(text).count();
        assert_eq!(parsed, 3);
    }

    #[test]
    fn content_on_the_marker_line() {
        assert_eq!(
            summary("--- {a: 1}\n--- # only a comment\n"),
            vec![(1, 1), (2, 2)]
        );
    }

    #[test]
    fn document_end_marker_and_directives() {
        let text = "a: 1\n...\n%YAML 1.2\n---\nb: 2\n";
        assert_eq!(summary(text), vec![(1, 1), (2, 5)]);
        for d in split(text) {
            let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&d.text).unwrap();
            assert!(v.is_mapping(), "{:?}", d.text);
        }
    }

    #[test]
    fn marker_like_text_inside_a_line_is_not_a_marker() {
        assert_eq!(summary("a: |\n  ---\nb: ---x\n---x: 1\n"), vec![(1, 1)]);
    }

    #[test]
    fn offset_makes_parser_lines_absolute() {
        let docs = split("a: 1\n---\nb: 2\nc: [\n");
        let err = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&docs[1].text).unwrap_err();
        let line = err.location().map(|l| l.line() + docs[1].offset);
        assert_eq!(line, Some(5));
    }

    #[test]
    fn document_text_does_not_grow_with_its_position() {
        let doc = "---\na: 1\nb: 2\n";
        let docs = split(&doc.repeat(1000));
        assert_eq!(docs.len(), 1000);
        assert!(
            docs.iter().all(|d| d.text == doc),
            "each document holds only its own lines"
        );
        assert_eq!(docs[999].offset, 2997);
    }

    #[test]
    fn crlf_line_endings() {
        assert_eq!(summary("a: 1\r\n---\r\nb: 2\r\n"), vec![(1, 1), (2, 3)]);
    }
}

//! A fast path for the plain YAML that manifests are written in: block mappings and
//! sequences of simple scalars, full-line comments, one-line flow mappings.
//!
//! The general parser costs ~17 µs per APIService document, most of a 10,000-object start.
//! This one reads the common shape directly into the same `serde_json::Value`, and returns
//! `None` on anything it is not certain to read exactly as the general parser does (tabs,
//! control or non-ASCII characters, anchors, tags, block or escaped scalars, inline
//! comments, duplicate keys, scalars YAML may resolve to something other than a string,
//! errors of any kind): the caller then parses that document the general way, which also
//! reports its errors.

use serde_json::{Map, Value};

/// One line with content: its indentation and its text without trailing blanks.
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

/// The document as the general parser would read it, or `None` to let it.
pub(super) fn parse(doc: &str) -> Option<Value> {
    // Printable ASCII and newlines only: YAML refuses control characters, and what it
    // accepts beyond ASCII (and where) is the general parser's business.
    if !doc
        .bytes()
        .all(|b| b == b'\n' || (b' '..=b'~').contains(&b))
    {
        return None;
    }
    let mut lines = Vec::new();
    for (i, raw) in doc.lines().enumerate() {
        let text = raw.trim_start_matches(' ');
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        if i == 0 && raw.trim_end() == "---" {
            continue;
        }
        if raw.starts_with("---") || raw.starts_with("...") || raw.starts_with('%') {
            return None;
        }
        lines.push(Line {
            indent: raw.len() - text.len(),
            text: text.trim_end_matches(' '),
        });
    }
    if lines.first()?.indent != 0 {
        return None;
    }
    let mut p = Parser { lines, at: 0 };
    let value = p.mapping(0)?;
    (p.at == p.lines.len()).then_some(value)
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
}

/// How a line's text starts.
enum Head<'a> {
    /// `key:` then the rest (empty when the value is a nested block or null).
    Key(&'a str, &'a str),
    /// No `key:` at all: a scalar (in a sequence item).
    NotKey,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.at).copied()
    }

    /// The block that starts at the current line, indented `indent`.
    fn node(&mut self, indent: usize) -> Option<Value> {
        let line = self.peek()?;
        if is_item(line.text) {
            self.sequence(indent)
        } else {
            self.mapping(indent)
        }
    }

    fn mapping(&mut self, indent: usize) -> Option<Value> {
        let mut map = Map::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent || is_item(line.text) {
                return None;
            }
            let Head::Key(key, rest) = head(line.text)? else {
                return None;
            };
            self.at += 1;
            let value = if rest.is_empty() {
                match self.peek() {
                    Some(next) if next.indent > indent => self.node(next.indent)?,
                    // A sequence may sit at its key's own indentation.
                    Some(next) if next.indent == indent && is_item(next.text) => {
                        self.sequence(indent)?
                    }
                    _ => Value::Null,
                }
            } else {
                scalar_or_flow(rest)?
            };
            if map.insert(key.to_string(), value).is_some() {
                return None;
            }
        }
        Some(Value::Object(map))
    }

    fn sequence(&mut self, indent: usize) -> Option<Value> {
        let mut items = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent || (line.indent == indent && !is_item(line.text)) {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let rest = line.text[1..].trim_start_matches(' ');
            if rest.is_empty() {
                self.at += 1;
                items.push(match self.peek() {
                    Some(next) if next.indent > indent => self.node(next.indent)?,
                    _ => Value::Null,
                });
                continue;
            }
            if is_item(rest) {
                return None;
            }
            match head(rest)? {
                Head::Key(..) => {
                    // `- key: v`: a mapping whose keys line up with this first one.
                    let column = indent + (line.text.len() - rest.len());
                    self.lines[self.at] = Line {
                        indent: column,
                        text: rest,
                    };
                    items.push(self.mapping(column)?);
                }
                Head::NotKey => {
                    self.at += 1;
                    items.push(scalar_or_flow(rest)?);
                }
            }
        }
        Some(Value::Array(items))
    }
}

/// A sequence item: `-` alone or followed by a blank.
fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// Splits `key: rest`; `None` when the line has a key this fast path does not read.
fn head(text: &str) -> Option<Head<'_>> {
    let colon = text
        .match_indices(':')
        .map(|(i, _)| i)
        .find(|&i| matches!(text.as_bytes().get(i + 1), None | Some(b' ')));
    let Some(colon) = colon else {
        return Some(Head::NotKey);
    };
    let key = &text[..colon];
    let plain_key = key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'));
    let first = key.bytes().next()?;
    if !plain_key || !first.is_ascii_alphabetic() || special_word(key) {
        return None;
    }
    Some(Head::Key(key, text[colon + 1..].trim_start_matches(' ')))
}

/// A value on the key's line: a scalar, or a one-line flow mapping of plain scalars.
fn scalar_or_flow(text: &str) -> Option<Value> {
    if let Some(inner) = text.strip_prefix('{') {
        let inner = inner.strip_suffix('}')?.trim_matches(' ');
        let mut map = Map::new();
        if inner.is_empty() {
            return Some(Value::Object(map));
        }
        for entry in inner.split(',') {
            let Head::Key(key, value) = head(entry.trim_matches(' '))? else {
                return None;
            };
            if value.is_empty() || map.insert(key.to_string(), plain(value)?).is_some() {
                return None;
            }
        }
        return Some(Value::Object(map));
    }
    if text == "[]" {
        return Some(Value::Array(Vec::new()));
    }
    scalar(text)
}

fn scalar(text: &str) -> Option<Value> {
    let quoted = |q: char| {
        let inner = text.strip_prefix(q)?.strip_suffix(q)?;
        (!inner.contains([q, '\\'])).then(|| Value::String(inner.to_string()))
    };
    match text.as_bytes().first()? {
        b'"' => quoted('"'),
        b'\'' => quoted('\''),
        _ => plain(text),
    }
}

/// An unquoted scalar: a string, `true`/`false`, or a decimal integer; anything YAML might
/// resolve otherwise (null, YAML 1.1 booleans, floats, octal, dates) is left to the parser.
fn plain(text: &str) -> Option<Value> {
    let first = *text.as_bytes().first()?;
    let indicator = b"-?:,[]{}#&*!|>'\"%@`".contains(&first);
    if indicator || text.contains(" #") || text.contains(": ") || text.ends_with(':') {
        return None;
    }
    if text.contains([',', '[', ']', '{', '}']) {
        // Harmless in block context, but they end a scalar in a flow mapping.
        return None;
    }
    match text {
        "true" => return Some(Value::Bool(true)),
        "false" => return Some(Value::Bool(false)),
        _ => {}
    }
    if special_word(text) {
        return None;
    }
    if first.is_ascii_digit() || first == b'+' || first == b'.' {
        let canonical = text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || first != b'0');
        return canonical
            .then(|| text.parse::<i64>().ok())
            .flatten()
            .map(|n| Value::Number(n.into()));
    }
    Some(Value::String(text.to_string()))
}

/// Words some YAML schema resolves to null or a boolean.
fn special_word(text: &str) -> bool {
    const WORDS: &[&str] = &[
        "null", "~", "true", "false", "yes", "no", "on", "off", "y", "n",
    ];
    text.len() <= 5 && WORDS.iter().any(|w| w.eq_ignore_ascii_case(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::manifests::json_value::JsonValue;

    fn general(text: &str) -> Option<Value> {
        crate::yaml::from_str::<JsonValue>(text).ok().map(|v| v.0)
    }

    /// The property: whatever the fast path reads, the general parser reads the same.
    fn agrees(text: &str) -> bool {
        match parse(text) {
            Some(v) => {
                assert_eq!(Some(&v), general(text).as_ref(), "{text:?}");
                true
            }
            None => false,
        }
    }

    const BENCH: &str = "---\napiVersion: apiregistration.k8s.io/v1\nkind: APIService\n\
        metadata:\n  name: v1.g7.bench.example.com\nspec:\n  group: g7.bench.example.com\n  \
        version: v1\n  groupPriorityMinimum: 100\n  versionPriority: 10\n  \
        insecureSkipTLSVerify: true\n  service: {namespace: bench, name: api, port: 443}\n";

    const NESTED: &str = "# a comment\napiVersion: apiregistration.k8s.io/v1\nkind: APIService\n\
        metadata:\n  name: v1.a.example.com\n  labels:\n    autoregister.io/managed: \"true\"\n  \
        annotations: {}\nspec:\n  caBundle: 'LS0tLS1CRUdJTg=='\n  group: a.example.com\n  \
        service:\n    namespace: ns\n    name: svc\n  list:\n  - a\n  - b: 1\n    c: two words\n  \
        -\n    - x\n  empty:\n  version: v1\n";

    #[test]
    fn reads_the_common_shapes_as_the_general_parser_does() {
        assert!(agrees(BENCH));
        assert!(agrees(NESTED));
        assert!(agrees("a: 1\nb:\n  - 0\n  - 42\n  - word\n"));
        assert!(agrees("a:\n- x\n- z\nb: {}\nc: []\n"));
    }

    #[test]
    fn leaves_everything_else_to_the_general_parser() {
        for text in [
            "a: yes\n",
            "a: null\n",
            "a: ~\n",
            "a: True\n",
            "a: 010\n",
            "a: 1.5\n",
            "a: 0x10\n",
            "a: -3\n",
            "a: 2024-01-01\n",
            "a: \"esc\\n\"\n",
            "a: 'it''s'\n",
            "a: x # comment\n",
            "a: |\n  block\n",
            "a: >\n  folded\n",
            "a: &anchor x\nb: *anchor\n",
            "a: !tag x\n",
            "a: 1\na: 2\n",
            "a: {b: 1, b: 2}\n",
            "a: {b: [1]}\n",
            "a: [1, 2]\n",
            "a:\tx\n",
            "a: x\r\n",
            "a: x\u{0}y\n",
            "a: x\u{7f}\n",
            "a: caf\u{e9}\n",
            "a: \u{feff}x\n",
            "\"quoted key\": 1\n",
            "1: one\n",
            "a: b: c\n",
            "a: x\n  continued\n",
            "  a: 1\n",
            "- top level sequence\n",
            "--- {a: 1}\n",
            "a: 1\n...\n",
            "",
            "# only a comment\n",
            "a:\n  - - nested\n",
            "? complex key\n",
        ] {
            assert!(!agrees(text), "the fast path read {text:?}");
        }
    }

    /// Every single-byte mutation of realistic documents: the fast path either agrees with
    /// the general parser or declines.
    #[test]
    fn mutated_documents_are_read_alike_or_declined() {
        let mut read = 0;
        for base in [BENCH, NESTED] {
            for (i, _) in base.char_indices() {
                for b in [
                    " ", "-", ":", "#", "\"", "'", "x", "1", "\n", "{", ",", "~", "\u{0}", "\u{e9}",
                ] {
                    let mut inserted = base.to_string();
                    inserted.insert_str(i, b);
                    read += usize::from(agrees(&inserted));
                    let mut replaced = base.to_string();
                    let end = i + base[i..].chars().next().map_or(0, char::len_utf8);
                    replaced.replace_range(i..end, b);
                    read += usize::from(agrees(&replaced));
                }
                let mut removed = base.to_string();
                removed.remove(i);
                read += usize::from(agrees(&removed));
            }
        }
        // Most mutations still read fast: the property is not met by declining everything.
        assert!(read > 1000, "only {read} mutations read by the fast path");
    }
}

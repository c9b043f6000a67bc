//! YAML parsing for manifests and kubeconfig, bounded against hostile input, with
//! error lines counted the way `grep -n` counts them.
//!
//! serde_yaml_ng caps the number of alias jumps (100 per event of the document) but not what
//! they expand to: one anchored list of n items aliased n times is n² nodes, so a file of a
//! few hundred KB could ask for gigabytes (the quadratic form of "billion laughs"). A text
//! that defines anchors is therefore walked once without allocating, counting what the
//! expansion costs, and refused over [`expansion_budget`]. Without a `&` there are no
//! anchors, hence no aliases, and the extra walk is skipped.
//!
//! The libyaml port also takes time quadratic in the depth of flow collections
//! (`{a: {a: ...` 100,000 deep costs minutes), while serde gives up at depth 128
//! anyway; a text nested deeper than [`MAX_FLOW_DEPTH`] is refused before parsing.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, Visitor};

/// Cost of one node, about what a `serde_json::Value` node takes in memory.
const NODE_COST: u64 = 32;

/// What a document of `len` bytes may expand to: 64 times its text (more than any
/// alias-free document costs) or 16 MiB, whichever is more.
pub(crate) fn expansion_budget(len: usize) -> u64 {
    (len as u64).saturating_mul(64).max(16 << 20)
}

/// Net `[`/`{` nesting above which a text is refused unparsed (serde stops at 128; brackets
/// inside strings count too, so the margin is wide).
pub(crate) const MAX_FLOW_DEPTH: usize = 1000;

/// Why a YAML text was refused.
#[derive(Debug)]
pub(crate) struct YamlError {
    /// 1-based line of the text (lines end with `\n`), when known.
    pub line: Option<usize>,
    /// The parser's message.
    pub message: String,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// `serde_yaml_ng::from_str`, refusing texts nested too deep and documents whose aliases
/// expand beyond the budget.
pub(crate) fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    check_flow_depth(text)?;
    let parser_error = |e: serde_yaml_ng::Error| YamlError {
        line: error_line(text, &e),
        message: e.to_string(),
    };
    if text.contains('&') {
        let left = Cell::new(expansion_budget(text.len()));
        Counter(&left)
            .deserialize(serde_yaml_ng::Deserializer::from_str(text))
            .map_err(parser_error)?;
    }
    serde_yaml_ng::from_str(text).map_err(parser_error)
}

fn check_flow_depth(text: &str) -> Result<(), YamlError> {
    // A text nests at most as deep as it is long: most documents are shorter than the
    // limit and need no walk. Lines are counted only for a text refused.
    if text.len() <= MAX_FLOW_DEPTH {
        return Ok(());
    }
    let mut depth = 0usize;
    for (at, b) in text.bytes().enumerate() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    let line = text.as_bytes()[..at]
                        .iter()
                        .filter(|&&b| b == b'\n')
                        .count()
                        + 1;
                    return Err(YamlError {
                        line: Some(line),
                        message: format!(
                            "nested deeper than {MAX_FLOW_DEPTH} levels at line {line}"
                        ),
                    });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The line of the file an error is about. The parser places a duplicate key at the start of
/// its mapping and a forbidden control character at line 1 (it gives a byte position), so
/// both are found again in the text; every other error keeps the parser's line.
fn error_line(text: &str, e: &serde_yaml_ng::Error) -> Option<usize> {
    let message = e.to_string();
    if message.contains("control characters are not allowed") {
        if let Some(line) = first_control_character_line(text) {
            return Some(line);
        }
    }
    let loc = e.location()?;
    let parser_line = newline_line(text, loc.line());
    if let Some(key) = duplicate_key(&message) {
        if let Some(line) = second_key_line(text, parser_line, loc.column(), key) {
            return Some(line);
        }
    }
    Some(parser_line)
}

/// The 1-based `\n`-counted line of the first character YAML forbids (C0 controls but
/// tab, LF and CR; DEL; C1 but NEL; U+FFFE and U+FFFF).
fn first_control_character_line(text: &str) -> Option<usize> {
    let bad = |c: char| {
        matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}')
            || matches!(c, '\u{80}'..='\u{84}' | '\u{86}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}')
    };
    let at = text.find(bad)?;
    Some(text[..at].matches('\n').count() + 1)
}

/// The key of serde_yaml_ng's `duplicate entry with key "K"` message.
fn duplicate_key(message: &str) -> Option<&str> {
    let rest = message.split("duplicate entry with key \"").nth(1)?;
    rest.rfind('"').map(|end| &rest[..end])
}

/// Where `key` occurs the second time in the block mapping whose first key is at `line`,
/// `column` (1-based): on that line at that column, then on later lines indented to it,
/// until a line indented less ends the mapping. `None` when not found that way (a flow
/// mapping, an unusual spelling of the key).
fn second_key_line(text: &str, line: usize, column: usize, key: &str) -> Option<usize> {
    let indent = column.checked_sub(1)?;
    let spellings = [key.to_string(), format!("\"{key}\""), format!("'{key}'")];
    let is_key_at = |l: &str, at: usize| {
        l.get(at..).is_some_and(|rest| {
            spellings.iter().any(|k| {
                rest.strip_prefix(k.as_str())
                    .is_some_and(|after| after.trim_start_matches([' ', '\t']).starts_with(':'))
            })
        })
    };
    let mut seen = 0;
    for (i, l) in text.split('\n').enumerate().skip(line - 1) {
        let n = i + 1;
        let l = l.trim_end_matches('\r');
        let at = if n == line {
            indent
        } else {
            let content = l.trim_start_matches(' ');
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let lead = l.len() - content.len();
            if lead < indent {
                return None;
            }
            if lead > indent {
                continue;
            }
            lead
        };
        if is_key_at(l, at) {
            seen += 1;
            if seen == 2 {
                return Some(n);
            }
        }
    }
    None
}

/// The `\n`-counted line of `text` where the parser's line `parser_line` is: libyaml also
/// breaks lines at a lone `\r`, NEL, LS and PS, which editors and `grep -n` do not.
pub(crate) fn newline_line(text: &str, parser_line: usize) -> usize {
    let (mut parser, mut ours) = (1, 1);
    let mut chars = text.chars().peekable();
    while parser < parser_line {
        let Some(c) = chars.next() else {
            // Past the end (an error at end of input): the rest counts as is.
            return ours + (parser_line - parser);
        };
        match c {
            '\n' => ours += 1,
            '\r' if chars.peek() == Some(&'\n') => {
                chars.next();
                ours += 1;
            }
            '\r' | '\u{85}' | '\u{2028}' | '\u{2029}' => {}
            _ => continue,
        }
        parser += 1;
    }
    ours
}

/// Walks a document like `IgnoredAny`, taking each node's cost from the budget.
#[derive(Clone, Copy)]
struct Counter<'a>(&'a Cell<u64>);

impl Counter<'_> {
    fn take<E: de::Error>(self, bytes: usize) -> Result<(), E> {
        let cost = NODE_COST.saturating_add(bytes as u64);
        match self.0.get().checked_sub(cost) {
            Some(left) => {
                self.0.set(left);
                Ok(())
            }
            None => Err(E::custom(
                "YAML aliases expand to too much data (more than 64 times the file's size); \
                 write the values out instead of aliasing them",
            )),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.take(0)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.take(0)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.take(0)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.take(0)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.take(0)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.take(0)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.take(v.len())
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<(), E> {
        self.take(v.len())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.take(0)
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.take(0)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.take(0)?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.take(0)?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
    /// A tagged node (`!tag value`).
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        use de::VariantAccess as _;
        let ((), variant) = data.variant_seed(self)?;
        variant.newtype_variant_seed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One anchored list of `n` items, aliased `n` times: n² nodes from ~5n bytes.
    fn quadratic(n: usize) -> String {
        let mut s = String::from("a: &a [");
        s.push_str(&vec!["x"; n].join(","));
        s.push_str("]\nb: [");
        s.push_str(&vec!["*a"; n].join(","));
        s.push_str("]\n");
        s
    }

    #[test]
    fn quadratic_alias_expansion_is_refused_with_a_location() {
        let text = quadratic(20_000);
        let e = from_str::<serde_yaml_ng::Value>(&text).unwrap_err();
        assert!(e.to_string().contains("aliases expand to too much"), "{e}");
        assert!(e.line.is_some(), "{e}");
    }

    #[test]
    fn modest_aliases_still_work() {
        let v: serde_yaml_ng::Value = from_str(&quadratic(50)).unwrap();
        assert_eq!(v["b"][49][49], serde_yaml_ng::Value::from("x"));
        let v: serde_yaml_ng::Value = from_str("a: &x {k: v}\nb: *x\nc: !t &y 1\nd: *y\n").unwrap();
        assert_eq!(v["b"]["k"], serde_yaml_ng::Value::from("v"));
    }

    #[test]
    fn errors_are_the_parsers_own() {
        let text = "a: &x [\n";
        let ours = from_str::<serde_yaml_ng::Value>(text).unwrap_err();
        let theirs = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text).unwrap_err();
        assert_eq!(ours.to_string(), theirs.to_string());
    }

    #[test]
    fn deep_flow_nesting_is_refused_before_parsing() {
        let text = "a: 1\nb: ".to_string() + &"{a: ".repeat(100_000);
        let started = std::time::Instant::now();
        let e = from_str::<serde_yaml_ng::Value>(&text).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("nested deeper than 1000"), "{e}");
        // Balanced brackets in strings and shallow nesting are fine.
        let ok = format!("a: \"{}{}\"\nb: [[1]]\n", "[".repeat(900), "]".repeat(900));
        from_str::<serde_yaml_ng::Value>(&ok).unwrap();
    }

    #[test]
    fn a_duplicate_key_is_placed_on_its_own_line() {
        let mut text = String::new();
        for i in 1..=11 {
            text.push_str(&format!("k{i}: v\n"));
        }
        text.push_str("k3: again\n");
        let e = from_str::<serde_yaml_ng::Value>(&text).unwrap_err();
        assert_eq!(e.line, Some(12), "{e}");
        // Nested, after a deeper mapping and a comment, and quoted.
        let text = "a:\n  b: 1\n  c:\n    d: 1\n    e:\n      d: 0\n    # d: no\n    \"d\": 2\n";
        let e = from_str::<serde_yaml_ng::Value>(text).unwrap_err();
        assert_eq!(e.line, Some(8), "{e}");
        // A mapping inside a sequence item starts after "- ".
        let text = "items:\n- name: x\n  kind: y\n  name: z\n";
        let e = from_str::<serde_yaml_ng::Value>(text).unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        // A flow mapping keeps the parser's own line.
        let e = from_str::<serde_yaml_ng::Value>("a: 1\nb: {x: 1, x: 2}\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn a_control_character_is_placed_on_its_line() {
        for (text, line) in [
            ("a: 1\nb: x\u{0}y\n", 2),
            ("a: 1\nb: 2\nc: x\u{7}y\n", 3),
            ("a: \u{e9}\u{e9}\u{e9}\nb: 2\nc: x\u{1b}y\n", 3),
        ] {
            let e = from_str::<serde_yaml_ng::Value>(text).unwrap_err();
            assert_eq!(e.line, Some(line), "{text:?}: {e}");
        }
    }

    #[test]
    fn error_lines_count_newlines_only() {
        // libyaml counts a lone CR, NEL and LS as line breaks; the error is on line 3 of the file.
        for text in [
            "a: 1\n\rb: 2\nc: ]\n",
            "a: \"x\u{2028}y\u{85}\"\nb: 2\nc: ]\n",
            "a: 1\r\nb: 2\r\nc: ]\r\n",
        ] {
            let e = from_str::<serde_yaml_ng::Value>(text).unwrap_err();
            assert_eq!(e.line, Some(3), "{text:?}: {e}");
        }
    }
}

//! Reading the project's Markdown as GitHub renders it, for the doc checks: fenced code
//! blocks, headings and their anchors, links, inline code spans, and the command lines in
//! them. Plain string work, enough for the subset of Markdown the docs use.
//!
//! Use with `#[path = "support/markdown.rs"] mod markdown;`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One Markdown file: its path relative to the repository root, and its lines.
pub struct Doc {
    /// Relative to the repository root, as failures name it (`docs/running.md`).
    pub path: PathBuf,
    /// The file's lines; line `n` (1-based) is `lines[n - 1]`.
    pub lines: Vec<String>,
}

/// A fenced code block.
pub struct Block {
    /// Line of the opening fence (1-based).
    pub line: usize,
    /// The info string after the fence (`sh run`, `rust no_run`, `` for none).
    pub info: String,
    /// The lines inside, each with its line number.
    pub body: Vec<(usize, String)>,
}

impl Block {
    /// The info string's first word (the language), lower case.
    pub fn lang(&self) -> String {
        self.info
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_lowercase()
    }

    /// Whether the info string carries `word` after the language (`sh run`).
    pub fn has_attr(&self, word: &str) -> bool {
        self.info.split_whitespace().skip(1).any(|w| w == word)
    }

    /// The block's text, as a shell would read it.
    pub fn text(&self) -> String {
        let mut s = self
            .body
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        s.push('\n');
        s
    }
}

/// README.md and every `docs/*.md` under `root`, in a stable order.
pub fn load_all(root: &Path) -> Vec<Doc> {
    let mut paths = vec![PathBuf::from("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .map(|p| PathBuf::from("docs").join(p.file_name().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    pages.sort();
    paths.extend(pages);
    paths.into_iter().map(|p| load(root, &p)).collect()
}

/// One file, `rel` relative to `root`.
pub fn load(root: &Path, rel: &Path) -> Doc {
    let text = std::fs::read_to_string(root.join(rel))
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", rel.display()));
    Doc::parse(rel, &text)
}

impl Doc {
    /// A document made of `text` (for tests of the checks themselves).
    pub fn parse(rel: &Path, text: &str) -> Doc {
        Doc {
            path: rel.to_path_buf(),
            lines: text.lines().map(str::to_string).collect(),
        }
    }

    /// `path:line`, as a failure names a place.
    pub fn at(&self, line: usize) -> String {
        format!("{}:{line}", self.path.display())
    }

    /// Every fenced code block.
    pub fn blocks(&self) -> Vec<Block> {
        let mut blocks = Vec::new();
        let mut open: Option<(String, Block)> = None;
        for (i, line) in self.lines.iter().enumerate() {
            let n = i + 1;
            let t = line.trim_start();
            match &mut open {
                None => {
                    if let Some(fence) = fence_of(t) {
                        let info = t[fence.len()..].trim().to_string();
                        open = Some((
                            fence,
                            Block {
                                line: n,
                                info,
                                body: Vec::new(),
                            },
                        ));
                    }
                }
                Some((fence, block)) => {
                    if closes(t, fence) {
                        if let Some((_, b)) = open.take() {
                            blocks.push(b);
                        }
                    } else {
                        // Inside a list item the block is indented as the item's text.
                        let indent = line.len() - t.len();
                        let strip = indent.min(leading_spaces(&self.lines[block.line - 1]));
                        block.body.push((n, line[strip..].to_string()));
                    }
                }
            }
        }
        blocks
    }

    /// The lines outside fenced code blocks, with their numbers.
    pub fn prose(&self) -> Vec<(usize, &str)> {
        let mut inside: Option<String> = None;
        let mut out = Vec::new();
        for (i, line) in self.lines.iter().enumerate() {
            let t = line.trim_start();
            match &inside {
                None => match fence_of(t) {
                    Some(f) => inside = Some(f),
                    None => out.push((i + 1, line.as_str())),
                },
                Some(f) => {
                    if closes(t, f) {
                        inside = None;
                    }
                }
            }
        }
        out
    }

    /// Paragraphs of prose (runs of non-blank lines), joined with spaces, with a map from
    /// each character offset back to its line. Code spans and links may break across lines.
    pub fn paragraphs(&self) -> Vec<Paragraph> {
        let mut out = Vec::new();
        let mut cur = Paragraph::default();
        let mut last = 0;
        for (n, line) in self.prose() {
            if (line.trim().is_empty() || n != last + 1) && !cur.text.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            last = n;
            if line.trim().is_empty() {
                continue;
            }
            // A table row or heading is a paragraph of its own.
            let own = line.trim_start().starts_with('|') || line.trim_start().starts_with('#');
            if own && !cur.text.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            if !cur.text.is_empty() {
                cur.push(' ', n);
            }
            for c in line.chars() {
                cur.push(c, n);
            }
            if own {
                out.push(std::mem::take(&mut cur));
            }
        }
        if !cur.text.is_empty() {
            out.push(cur);
        }
        out
    }

    /// Headings (ATX), each with its line, its text and its anchor as GitHub makes it.
    pub fn headings(&self) -> Vec<(usize, String, String)> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut out = Vec::new();
        for (n, line) in self.prose() {
            let t = line.trim_start();
            let hashes = t.chars().take_while(|&c| c == '#').count();
            if hashes == 0 || hashes > 6 || !t[hashes..].starts_with(' ') {
                continue;
            }
            let text = t[hashes..].trim().trim_end_matches('#').trim().to_string();
            let base = slug(&rendered(&text));
            // github-slugger: a repeated slug gets `-1`, `-2`, … (skipping taken ones).
            let mut anchor = base.clone();
            while seen.contains_key(&anchor) {
                let count = seen.entry(base.clone()).or_insert(0);
                *count += 1;
                anchor = format!("{base}-{count}");
            }
            seen.insert(anchor.clone(), 0);
            out.push((n, text, anchor));
        }
        out
    }

    /// Every link target in the prose (`[text](target)`, `![alt](target)` and
    /// `[label]: target`), with its line; code spans are not looked into.
    pub fn links(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for p in self.paragraphs() {
            let text = p.without_code();
            let t = text.as_bytes();
            let mut i = 0;
            while let Some(off) = text[i..].find("](") {
                let start = i + off + 2;
                let mut depth = 1;
                let mut end = start;
                while end < t.len() {
                    match t[end] {
                        b'(' => depth += 1,
                        b')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    end += 1;
                }
                let target = text[start..end.min(t.len())].trim();
                // `(url "title")`: the title is not part of the target.
                let target = target.split_whitespace().next().unwrap_or("");
                out.push((p.line_at(i + off), target.to_string()));
                i = end.min(t.len());
            }
            // Reference definitions: `[label]: target` at the start of a paragraph line.
            let trimmed = text.trim_start();
            if let Some(rest) = trimmed.strip_prefix('[') {
                if let Some((_, after)) = rest.split_once("]:") {
                    if let Some(target) = after.split_whitespace().next() {
                        out.push((p.line_at(0), target.to_string()));
                    }
                }
            }
        }
        out
    }

    /// Inline code spans of the prose, each with the line it starts on.
    pub fn code_spans(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for p in self.paragraphs() {
            for (start, span) in spans(&p.text) {
                out.push((p.line_at(start), span));
            }
        }
        out
    }
}

/// A paragraph's text and, per character, its source line.
#[derive(Default)]
pub struct Paragraph {
    /// The lines joined with single spaces.
    pub text: String,
    lines: Vec<(usize, usize)>,
}

impl Paragraph {
    fn push(&mut self, c: char, line: usize) {
        self.lines.push((self.text.len(), line));
        self.text.push(c);
    }

    /// The line the byte at `offset` came from.
    pub fn line_at(&self, offset: usize) -> usize {
        match self.lines.binary_search_by_key(&offset, |&(o, _)| o) {
            Ok(i) => self.lines[i].1,
            Err(0) => self.lines.first().map_or(0, |l| l.1),
            Err(i) => self.lines[i - 1].1,
        }
    }

    /// The text with every code span blanked out (same length), so links and markup
    /// inside code are not read as such.
    pub fn without_code(&self) -> String {
        let mut bytes = self.text.clone().into_bytes();
        for (start, len) in span_ranges(&self.text) {
            for b in &mut bytes[start..start + len] {
                *b = b' ';
            }
        }
        String::from_utf8(bytes).unwrap_or_default()
    }
}

/// The opening fence of `t` (a trimmed line), if it is one: three or more backticks or
/// tildes.
fn fence_of(t: &str) -> Option<String> {
    for ch in ['`', '~'] {
        let n = t.chars().take_while(|&c| c == ch).count();
        if n >= 3 {
            return Some(ch.to_string().repeat(n));
        }
    }
    None
}

/// Whether `t` (a trimmed line) closes a block opened with `fence`.
fn closes(t: &str, fence: &str) -> bool {
    let ch = fence.chars().next().unwrap_or('`');
    let n = t.chars().take_while(|&c| c == ch).count();
    n >= fence.len() && t[n..].trim().is_empty()
}

fn leading_spaces(s: &str) -> usize {
    s.len() - s.trim_start().len()
}

/// `(start, len)` of every code span in `text`, delimiters included: a run of N backticks
/// up to the next run of exactly N.
fn span_ranges(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let n = b[i..].iter().take_while(|&&c| c == b'`').count();
        let mut j = i + n;
        let mut closed = None;
        while j < b.len() {
            if b[j] == b'`' {
                let m = b[j..].iter().take_while(|&&c| c == b'`').count();
                if m == n {
                    closed = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match closed {
            Some(end) => {
                out.push((i, end - i));
                i = end;
            }
            None => i += n,
        }
    }
    out
}

/// Every code span's content with its start offset (one space of padding trimmed, as
/// CommonMark does).
fn spans(text: &str) -> Vec<(usize, String)> {
    span_ranges(text)
        .into_iter()
        .map(|(start, len)| {
            let n = text[start..].bytes().take_while(|&c| c == b'`').count();
            let inner = &text[start + n..start + len - n];
            let inner = if inner.len() > 1 && inner.starts_with(' ') && inner.ends_with(' ') {
                &inner[1..inner.len() - 1]
            } else {
                inner
            };
            (start, inner.to_string())
        })
        .collect()
}

/// A heading's text as rendered: code spans keep their content, links their text, and
/// emphasis and HTML go.
pub fn rendered(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            if let Some(close) = inner.find("](") {
                if let Some(end) = inner[close..].find(')') {
                    out.push_str(&rendered(&inner[..close]));
                    rest = &inner[close + end + 1..];
                    continue;
                }
            }
        }
        if let Some(inner) = rest.strip_prefix('<') {
            if let Some(end) = inner.find('>') {
                rest = &inner[end + 1..];
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c != '`' && c != '*' {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// GitHub's anchor for a heading's rendered text (github-slugger): lower case; letters,
/// digits, `-` and `_` kept, spaces made `-`, everything else dropped.
pub fn slug(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// Who a command line is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// `autoregister COMMAND …`: `run`, `plan`, `version`, `help`, `top` (flags before any
    /// command) or `any` (a placeholder such as `COMMAND`).
    Autoregister(String),
    /// `autoregister-testserver …`.
    TestServer,
    /// Flags alone (`--adopt`): the page's default program.
    Bare,
    /// Another program (`kubectl`, `cargo`, …): its flags are not ours to check.
    Other(String),
}

/// The programs and flags named in one line of shell, or one code span: split at `;`,
/// `&&`, `||`, ` | ` and `$(…)`, each part's program found past variable assignments.
pub fn command_lines(line: &str, comments: bool) -> Vec<(Program, Vec<String>)> {
    let mut text = line.to_string();
    if comments {
        // A shell comment starts at a `#` after a space (not a URL's fragment).
        if let Some(i) = text.find(" #") {
            text.truncate(i);
        }
        if text.trim_start().starts_with('#') {
            return Vec::new();
        }
    }
    let text = text
        .replace("$(", " ; ")
        .replace("&&", " ; ")
        .replace("||", " ; ")
        .replace(" | ", " ; ")
        .replace(" & ", " ; ");
    let mut out = Vec::new();
    for part in text.split(';') {
        let mut words = part
            .split_whitespace()
            .map(|w| w.trim_matches(|c| c == '`' || c == '(' || c == ')'))
            .filter(|w| !w.is_empty())
            .skip_while(|w| {
                is_assignment(w) || matches!(*w, "$" | "env" | "sudo" | "time" | "exec")
            })
            .peekable();
        let Some(first) = words.next() else { continue };
        let rest: Vec<&str> = words.collect();
        let (program, args): (Program, Vec<&str>) = match first {
            "autoregister" => match rest.first() {
                Some(w) if w.starts_with('-') => (Program::Autoregister("top".into()), rest),
                Some(&w) if matches!(w, "run" | "plan" | "version" | "help") => {
                    (Program::Autoregister(w.into()), rest[1..].to_vec())
                }
                Some(_) => (Program::Autoregister("any".into()), rest[1..].to_vec()),
                None => (Program::Autoregister("top".into()), Vec::new()),
            },
            "run" | "plan" => (Program::Autoregister(first.into()), rest),
            "autoregister-testserver" => (Program::TestServer, rest),
            "cargo" => match cargo_bin_args(&rest) {
                Some((bin, args)) => match bin {
                    "autoregister" => match args.first() {
                        Some(&w) if matches!(w, "run" | "plan" | "version" | "help") => {
                            (Program::Autoregister(w.into()), args[1..].to_vec())
                        }
                        _ => (Program::Autoregister("top".into()), args),
                    },
                    "autoregister-testserver" => (Program::TestServer, args),
                    other => (
                        Program::Other(format!("cargo run --bin {other}")),
                        Vec::new(),
                    ),
                },
                None => (Program::Other("cargo".into()), Vec::new()),
            },
            w if w.starts_with('-') => {
                let mut all = vec![w];
                all.extend(rest);
                (Program::Bare, all)
            }
            other => (Program::Other(other.to_string()), Vec::new()),
        };
        if matches!(program, Program::Other(_)) {
            continue;
        }
        let flags: Vec<String> = args.iter().filter_map(|a| flag_of(a)).collect();
        out.push((program, flags));
    }
    out
}

/// `cargo run … --bin NAME … -- ARGS`: NAME and ARGS.
fn cargo_bin_args<'a>(words: &[&'a str]) -> Option<(&'a str, Vec<&'a str>)> {
    let sep = words.iter().position(|w| *w == "--")?;
    let bin = words[..sep]
        .windows(2)
        .find(|w| w[0] == "--bin")
        .map(|w| w[1])?;
    Some((bin, words[sep + 1..].to_vec()))
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The flag a word names, if any: `--name` (from `--name`, `--name=V`, `--name[=BOOL]`,
/// `--as*`) or `-x` (a single letter alone).
pub fn flag_of(word: &str) -> Option<String> {
    let w = word.trim_matches(|c| c == '[' || c == ']' || c == ',' || c == '"' || c == '\'');
    if let Some(rest) = w.strip_prefix("--") {
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Some(format!("--{}", name.trim_end_matches('-')));
        }
        return None;
    }
    let rest = w.strip_prefix('-')?;
    let mut chars = rest.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => Some(format!("-{c}")),
        _ => None,
    }
}

/// The flags a `--help` text lists: lines of its `flags:` section that start with two
/// spaces and a dash (`  --manifests PATH`, `  -o, --output FORMAT`).
pub fn help_flags(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_flags = false;
    for line in help.lines() {
        if line.trim_end() == "flags:" {
            in_flags = true;
            continue;
        }
        if in_flags && line.trim().is_empty() {
            in_flags = false;
        }
        if !in_flags {
            continue;
        }
        let Some(rest) = line.strip_prefix("  ") else {
            continue;
        };
        if !rest.starts_with('-') {
            continue;
        }
        let head = rest.split("  ").next().unwrap_or(rest);
        for word in head.split([' ', ',']) {
            if let Some(f) = flag_of(word) {
                out.push(f);
            }
        }
    }
    out
}

/// Make targets named in `text`: `make TARGET` (and `make TARGET VAR=…`).
pub fn make_targets(text: &str) -> Vec<String> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == '`' || c == '(' || c == ')' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|w| w[0] == "make")
        .map(|w| w[1])
        .filter(|t| {
            t.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && t.starts_with(|c: char| c.is_ascii_lowercase())
        })
        .map(str::to_string)
        .collect()
}

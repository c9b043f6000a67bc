//! A strict little checker of the Prometheus text exposition format (0.0.4), for tests.
//!
//! Checks what a scraper (or `promtool check metrics`) rejects: malformed lines, a second
//! `HELP`/`TYPE` for a family, a `TYPE` after the family's samples, a family's samples
//! split by another family, repeated series, unparsable values, and histograms whose
//! buckets are not cumulative or whose `+Inf` bucket differs from `_count`.
//!
//! Use from any test crate with `#[path = "support/promtext.rs"] mod promtext;`.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};

/// One sample: metric name, labels (sorted), value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed exposition: samples in order and each family's type.
#[derive(Debug, Default)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    pub types: HashMap<String, String>,
}

impl Exposition {
    /// The value of the sample `name` whose labels include all of `labels`, if exactly one matches.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect();
        match found.as_slice() {
            [one] => Some(one.value),
            _ => None,
        }
    }

    /// Every sample named `name`.
    pub fn all(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }
}

/// Parses and validates `text`; the error names the line and what is wrong.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut exp = Exposition::default();
    let mut helps = HashSet::new();
    let mut closed: HashSet<String> = HashSet::new(); // families whose samples have ended
    let mut with_samples: HashSet<String> = HashSet::new();
    let mut current: Option<String> = None;
    let mut series = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let at = |m: &str| format!("line {}: {m}: {line:?}", i + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix("# ") {
            let mut parts = c.splitn(3, ' ');
            let (kw, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let rest = parts.next().unwrap_or("");
            if kw != "HELP" && kw != "TYPE" {
                continue;
            }
            if !valid_name(name) {
                return Err(at("bad metric name"));
            }
            if closed.contains(name) || (with_samples.contains(name) && kw == "TYPE") {
                return Err(at("header after the family's samples"));
            }
            if kw == "HELP" && !helps.insert(name.to_string()) {
                return Err(at("second HELP"));
            }
            if kw == "TYPE" {
                if !matches!(
                    rest,
                    "counter" | "gauge" | "histogram" | "summary" | "untyped"
                ) {
                    return Err(at("bad type"));
                }
                if exp.types.insert(name.into(), rest.into()).is_some() {
                    return Err(at("second TYPE"));
                }
            }
            switch(&mut current, &mut closed, name);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let sample = parse_sample(line).map_err(|m| at(&m))?;
        let family = family_of(&sample.name, &exp.types);
        if closed.contains(&family) {
            return Err(at("family's samples are not contiguous"));
        }
        switch(&mut current, &mut closed, &family);
        with_samples.insert(family);
        let key = format!("{}{:?}", sample.name, sample.labels);
        if !series.insert(key) {
            return Err(at("repeated series"));
        }
        exp.samples.push(sample);
    }
    check_histograms(&exp)?;
    Ok(exp)
}

fn switch(current: &mut Option<String>, closed: &mut HashSet<String>, name: &str) {
    if current.as_deref() != Some(name) {
        if let Some(prev) = current.take() {
            closed.insert(prev);
        }
        *current = Some(name.to_string());
    }
}

fn family_of(name: &str, types: &HashMap<String, String>) -> String {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if matches!(
                types.get(base).map(String::as_str),
                Some("histogram" | "summary")
            ) {
                return base.to_string();
            }
        }
    }
    name.to_string()
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err("bad metric name".into());
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(r) = rest.strip_prefix('{') {
        rest = r;
        loop {
            if let Some(r) = rest.strip_prefix('}') {
                rest = r;
                break;
            }
            let eq = rest.find('=').ok_or("label without =")?;
            let key = &rest[..eq];
            if !valid_name(key) || key.contains(':') {
                return Err(format!("bad label name {key:?}"));
            }
            let mut chars = rest[eq + 1..].char_indices();
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err("label value not quoted".into());
            }
            let mut value = String::new();
            let mut end = None;
            while let Some((j, c)) = chars.next() {
                match c {
                    '\\' => match chars.next().map(|(_, c)| c) {
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        _ => return Err("bad escape in label value".into()),
                    },
                    '"' => {
                        end = Some(eq + 1 + j + 1);
                        break;
                    }
                    '\n' => return Err("newline in label value".into()),
                    c => value.push(c),
                }
            }
            let end = end.ok_or("unterminated label value")?;
            if labels.insert(key.to_string(), value).is_some() {
                return Err(format!("label {key} twice"));
            }
            rest = &rest[end..];
            rest = rest.strip_prefix(',').unwrap_or(rest);
        }
    }
    let mut fields = rest
        .strip_prefix(' ')
        .ok_or("no space before value")?
        .split(' ');
    let value = match fields.next().ok_or("no value")? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse::<f64>().map_err(|_| format!("bad value {v:?}"))?,
    };
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| "bad timestamp")?;
    }
    if fields.next().is_some() {
        return Err("trailing fields".into());
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

fn check_histograms(exp: &Exposition) -> Result<(), String> {
    for (family, kind) in &exp.types {
        if kind != "histogram" {
            continue;
        }
        // Group buckets by their labels without `le`.
        let mut groups: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for s in exp.all(&format!("{family}_bucket")) {
            let mut labels = s.labels.clone();
            let le = labels
                .remove("le")
                .ok_or(format!("{family}: bucket without le"))?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse::<f64>()
                    .map_err(|_| format!("{family}: bad le {le}"))?
            };
            groups
                .entry(format!("{labels:?}"))
                .or_default()
                .push((le, s.value));
        }
        for (labels, mut buckets) in groups {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
                return Err(format!("{family}{labels}: buckets not cumulative"));
            }
            let inf = buckets
                .last()
                .filter(|b| b.0.is_infinite())
                .ok_or(format!("{family}{labels}: no +Inf bucket"))?;
            let count = exp
                .all(&format!("{family}_count"))
                .into_iter()
                .find(|s| format!("{:?}", s.labels) == labels)
                .ok_or(format!("{family}{labels}: no _count"))?;
            if count.value != inf.1 {
                return Err(format!("{family}{labels}: +Inf bucket != _count"));
            }
        }
    }
    Ok(())
}

#[test]
fn the_checker_itself_rejects_what_a_scraper_rejects() {
    assert!(parse("# TYPE a gauge\na 1\n").is_ok());
    assert!(parse("# TYPE a gauge\n# TYPE a gauge\na 1\n").is_err());
    assert!(parse("a 1\n# TYPE a gauge\n").is_err());
    assert!(parse("a 1\nb 2\na{x=\"1\"} 3\n").is_err());
    assert!(parse("a 1\na 2\n").is_err());
    assert!(parse("a{x=\"1} 1\n").is_err());
    assert!(parse("a one\n").is_err());
    let h =
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n";
    assert!(parse(h).is_err());
    let h =
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 2\nh_sum 0\n";
    assert!(parse(h).is_ok());
}

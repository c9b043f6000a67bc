//! "Did you mean": the one known name close to a misspelt one.

/// The single candidate within a small edit distance of `typed` (or equal but for case), or
/// none when no candidate, or more than one equally close, qualifies.
pub(crate) fn closest<'a>(
    typed: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut best: Option<(usize, &'a str)> = None;
    let mut tied = false;
    for c in candidates {
        let d = if typed.eq_ignore_ascii_case(c) {
            0
        } else {
            distance(typed, c)
        };
        // One edit for short names (`kind` vs `king`), two for longer ones.
        let limit = if c.len() <= 4 { 1 } else { 2 };
        if d > limit {
            continue;
        }
        match best {
            Some((b, _)) if d > b => {}
            Some((b, _)) if d == b => tied = true,
            _ => {
                best = Some((d, c));
                tied = false;
            }
        }
    }
    best.filter(|_| !tied).map(|(_, c)| c)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
/// neighbours (`lables` is one edit from `labels`), by bytes.
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("servce", "service"), 1);
        assert_eq!(distance("lables", "labels"), 1);
        assert_eq!(distance("versionPriorty", "versionPriority"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn one_close_name_is_suggested() {
        let names = [
            "service",
            "group",
            "version",
            "versionPriority",
            "insecureSkipTLSVerify",
        ];
        assert_eq!(closest("servce", names.into_iter()), Some("service"));
        assert_eq!(
            closest("insecureSkipTlsVerify", names.into_iter()),
            Some("insecureSkipTLSVerify")
        );
        assert_eq!(closest("colour", names.into_iter()), None);
        // Two equally close names: no guess.
        assert_eq!(closest("ab", ["aa", "bb"].into_iter()), None);
    }
}

//! Prometheus text-format helpers shared by the metric registries (client, workqueue).

/// Escapes a label value as the text format requires (backslash, quote, newline).
pub(crate) fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

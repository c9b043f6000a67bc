//! How numbers read in log lines and messages: counts with their noun in the right
//! number, and durations in the units the flags take (`500ms`, `1.5s`, `2m`).

use std::time::Duration;

/// `1 APIService`, `2 APIServices`, `0 APIServices`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A duration as the flags write them: `250ms` below a second (fractions of a
/// millisecond kept, `0.4ms`), else seconds (`1.5s`, `30s`), whole minutes as `2m` and
/// whole hours as `1h`; never `1.234567891s` or `0ns`.
pub fn duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if d < Duration::from_secs(1) {
        return format!("{}ms", trim(format!("{ms:.3}")));
    }
    let secs = d.as_secs();
    if d.subsec_nanos() == 0 && secs % 3600 == 0 {
        format!("{}h", secs / 3600)
    } else if d.subsec_nanos() == 0 && secs % 60 == 0 {
        format!("{}m", secs / 60)
    } else {
        format!("{}s", trim(format!("{:.3}", d.as_secs_f64())))
    }
}

/// `1.500` → `1.5`, `2.000` → `2`.
fn trim(s: String) -> String {
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agree_with_their_noun() {
        assert_eq!(count(1, "APIService"), "1 APIService");
        assert_eq!(count(0, "APIService"), "0 APIServices");
        assert_eq!(count(3, "APIService"), "3 APIServices");
    }

    #[test]
    fn durations_read_as_the_flags_write_them() {
        let d = |ms: u64| duration(Duration::from_millis(ms));
        assert_eq!(d(0), "0ms");
        assert_eq!(d(250), "250ms");
        assert_eq!(duration(Duration::from_micros(400)), "0.4ms");
        assert_eq!(d(1500), "1.5s");
        assert_eq!(d(30_000), "30s");
        assert_eq!(d(120_000), "2m");
        assert_eq!(d(3_600_000), "1h");
        assert_eq!(duration(Duration::from_nanos(1_234_567_891)), "1.235s");
    }
}

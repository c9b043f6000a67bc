//! Durations as written on the command line and in annotations: `500ms`, `30s`, `2m`, `1h`, or Go-style `1m30s`.

use std::time::Duration;

/// Longest duration accepted: Go's (`2562047h47m16.854775807s`, about 292 years), so a
/// deadline `now + d` can never overflow an `Instant`.
pub const MAX: Duration = Duration::new(9_223_372_036, 854_775_807);

/// Parses a duration; a bare number is rejected so units are never guessed.
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {text:?} (use e.g. 500ms, 30s, 2m, 1h)");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total = Duration::try_from_secs_f64(value * scale)
            .ok()
            .and_then(|d| total.checked_add(d))
            .filter(|t| *t <= MAX)
            .ok_or_else(|| format!("duration {text:?} is too large (at most 2562047h)"))?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_each_unit_and_combinations() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn huge_durations_are_errors_not_overflows() {
        assert_eq!(parse("2562047h"), Ok(Duration::from_secs(2562047 * 3600)));
        for huge in [
            "2562048h",
            "99999999999999999999h",
            "18446744073709551615s1s",
            "9223372036s9223372036s",
            &format!("{}s", "9".repeat(400)),
        ] {
            let e = parse(huge).unwrap_err();
            assert!(e.contains("too large"), "{huge}: {e}");
        }
        // A deadline from the largest accepted value does not overflow.
        let _ = std::time::Instant::now() + parse("2562047h47m16s").unwrap();
    }

    #[test]
    fn rejects_missing_or_unknown_units() {
        for bad in ["", "10", "s", "10x", "-1s", "1d", "ms10"] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}

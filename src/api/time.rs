//! RFC 3339 timestamps as Kubernetes writes them (`metav1.Time`), without a date-time crate.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Formats `t` as RFC 3339 UTC with second precision, as Kubernetes writes timestamps.
pub fn format_rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{}Z", date_time(secs))
}

/// Formats `t` as a `metav1.MicroTime`: RFC 3339 UTC with exactly six fractional digits
/// (Go layout `2006-01-02T15:04:05.000000Z07:00`), as Lease `acquireTime`/`renewTime` are written.
pub fn format_rfc3339_micro(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!(
        "{}.{:06}Z",
        date_time(since.as_secs()),
        since.subsec_micros()
    )
}

/// `YYYY-MM-DDTHH:MM:SS` of `secs` since the epoch, UTC.
fn date_time(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, the RFC 3339 timestamps Kubernetes writes.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let mut n: u64 = 0;
        for (i, c) in frac[..digits].bytes().enumerate() {
            if i < 9 {
                n = n * 10 + u64::from(c - b'0');
            }
        }
        for _ in digits..9 {
            n *= 10;
        }
        nanos = u32::try_from(n).ok()?;
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            let h: i64 = rest[1..3].parse().ok()?;
            let m: i64 = rest[4..6].parse().ok()?;
            sign * (h * 3600 + m * 60)
        }
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(format_rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3661); // 2000-02-29 01:01:01
        assert_eq!(format_rfc3339(t), "2000-02-29T01:01:01Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_767_225_599); // 2025-12-31 23:59:59
        assert_eq!(format_rfc3339(t), "2025-12-31T23:59:59Z");
    }

    #[test]
    fn micro_time_has_six_fraction_digits_and_round_trips() {
        assert_eq!(
            format_rfc3339_micro(UNIX_EPOCH),
            "1970-01-01T00:00:00.000000Z"
        );
        let t = UNIX_EPOCH + Duration::new(1_709_210_096, 7_654_321); // 2024-02-29 12:34:56.007654321
        assert_eq!(format_rfc3339_micro(t), "2024-02-29T12:34:56.007654Z");
        // Parsing gives back the instant truncated to microseconds.
        let back = parse_rfc3339(&format_rfc3339_micro(t)).unwrap();
        assert_eq!(back, UNIX_EPOCH + Duration::new(1_709_210_096, 7_654_000));
    }

    fn at(s: &str) -> u64 {
        parse_rfc3339(s)
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn rfc3339_parses_kubernetes_timestamps() {
        assert_eq!(at("1970-01-01T00:00:00Z"), 0);
        assert_eq!(at("2024-02-29T12:34:56Z"), 1_709_210_096);
        assert_eq!(at("2024-02-29T14:34:56+02:00"), 1_709_210_096);
        assert_eq!(at("2024-02-29T12:04:56-00:30"), 1_709_210_096);
        let t = parse_rfc3339("2030-01-01T00:00:00.250Z").unwrap();
        assert_eq!(t.duration_since(UNIX_EPOCH).unwrap().subsec_millis(), 250);
        assert_eq!(at("2030-01-01T00:00:00Z"), 1_893_456_000);
    }

    #[test]
    fn rfc3339_rejects_garbage() {
        for bad in [
            "",
            "2024-02-29",
            "2024-02-29T12:34:56",
            "2024-13-01T00:00:00Z",
            "2024-02-29T12:34:56+0200",
            "2024-02-29T12:34:56.Z",
            "abcd-02-29T12:34:56Z",
            "2024-02-29T12:34:56Zjunk",
        ] {
            assert!(parse_rfc3339(bad).is_none(), "{bad}");
        }
    }
}

//! Numbers read from text exactly as their writer wrote them: ASCII digits
//! and nothing else. Rust's own `str::parse` and `from_str_radix` accept a
//! leading `+`, so `"+7"` would read as 7 and `"+f"` as 15: a permit id, a
//! hold count or a token that does not print back as it was read is not the
//! value it claims to be, and is refused instead.

use std::str::FromStr;

/// `text` as an unsigned decimal number: one or more ASCII digits, no sign,
/// no spaces; `None` otherwise (or when it does not fit `T`).
pub(crate) fn decimal<T: FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `text` as a signed decimal number: an optional `-`, then ASCII digits (the
/// form Redis's own integers take: `PTTL` of -2, an `INCR`ed counter).
pub(crate) fn signed_decimal<T: FromStr>(text: &str) -> Option<T> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    decimal::<u128>(digits)?;
    text.parse().ok()
}

/// Two hexadecimal digits (either case) as a byte: `"3f"` is 63; a sign, a
/// space or any other character is refused.
pub(crate) fn hex_byte(pair: &[u8]) -> Option<u8> {
    let [high, low] = pair else {
        return None;
    };
    let digit = |c: u8| char::from(c).to_digit(16);
    let value = digit(*high)? * 16 + digit(*low)?;
    u8::try_from(value).ok()
}

/// Exactly `2 * N` hexadecimal digits (either case) as `N` bytes, as a
/// permit id is printed; any other length or character is refused.
pub(crate) fn hex_bytes<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N {
        return None;
    }
    let mut bytes = [0u8; N];
    for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks(2)) {
        *byte = hex_byte(pair)?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_digits_are_a_number() {
        assert_eq!(decimal::<u64>("0"), Some(0));
        assert_eq!(decimal::<u64>("18446744073709551615"), Some(u64::MAX));
        for text in ["", "+7", "-7", " 7", "7 ", "0x7", "7.0", "١"] {
            assert_eq!(decimal::<u64>(text), None, "{text:?}");
        }
        assert_eq!(decimal::<u64>("18446744073709551616"), None);
        assert_eq!(signed_decimal::<i64>("-2"), Some(-2));
        assert_eq!(signed_decimal::<i64>("42"), Some(42));
        for text in ["", "-", "+2", "--2", "- 2"] {
            assert_eq!(signed_decimal::<i64>(text), None, "{text:?}");
        }
    }

    #[test]
    fn only_hex_digits_are_a_byte() {
        assert_eq!(hex_byte(b"3f"), Some(0x3f));
        assert_eq!(hex_byte(b"FF"), Some(0xff));
        assert_eq!(hex_byte(b"00"), Some(0));
        for pair in [&b"+f"[..], b"-1", b" f", b"f", b"fff", b"g0", b""] {
            assert_eq!(hex_byte(pair), None, "{pair:?}");
        }
    }
}

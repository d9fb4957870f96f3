//! A probe's W3C trace id as 16 bytes: what the history keeps per probe, what the
//! TTFT, TPOT and E2E exemplars carry (`trace_id`), and the key of the probe-record URL
//! (`/probes/{trace_id}`).

use std::fmt;

/// A W3C Trace Context trace id (§3.2.2.3): 16 bytes, never all zero; written as 32 lowercase
/// hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId([u8; 16]);

impl TraceId {
    /// The id written as `hex`: exactly 32 hex digits (either case), not all zero; `None` for
    /// anything else (shorter, longer, other characters, the invalid all-zero id).
    pub fn parse(hex: &str) -> Option<TraceId> {
        let digits = hex.as_bytes();
        if digits.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, pair) in digits.chunks_exact(2).enumerate() {
            let nibble = |c: u8| char::from(c).to_digit(16);
            bytes[i] = u8::try_from(nibble(pair[0])? * 16 + nibble(pair[1])?).ok()?;
        }
        TraceId::from_bytes(bytes)
    }

    /// The trace id of a valid W3C `traceparent` value (Trace Context level 1, §3.2):
    /// `VERSION-TRACEID-PARENTID-FLAGS`, every field lower-case hex (2, 32, 16 and 2 digits),
    /// the version not `ff`, neither id all zero. Version `00` has exactly these four fields; a
    /// later version may add more after a `-`, which are not read. `None` for anything else
    /// (upper-case hex included: the specification allows no other case).
    pub fn of_traceparent(traceparent: &str) -> Option<TraceId> {
        let b = traceparent.as_bytes();
        let lower_hex = |r: std::ops::Range<usize>| {
            b.get(r)
                .is_some_and(|d| d.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
        };
        let dashes = [2, 35, 52].iter().all(|&i| b.get(i) == Some(&b'-'));
        let shape =
            dashes && lower_hex(0..2) && lower_hex(3..35) && lower_hex(36..52) && lower_hex(53..55);
        let version = traceparent.get(0..2)?;
        let length = match version {
            "00" => b.len() == 55,
            _ => b.len() == 55 || b.get(55) == Some(&b'-'),
        };
        if !shape || !length || version == "ff" || b[36..52].iter().all(|&c| c == b'0') {
            return None;
        }
        TraceId::parse(traceparent.get(3..35)?)
    }

    /// `bytes` as an id; `None` when all zero (W3C: an invalid trace id).
    pub fn from_bytes(bytes: [u8; 16]) -> Option<TraceId> {
        (bytes != [0; 16]).then_some(TraceId(bytes))
    }

    /// The 16 bytes.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0
    }
}

impl fmt::Display for TraceId {
    /// 32 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.hex().as_str())
    }
}

/// A trace id's 32 lowercase hex digits, on the stack ([`TraceId::hex`]).
pub struct TraceIdHex([u8; 32]);

impl TraceIdHex {
    /// The digits.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

impl TraceId {
    /// The 32 lowercase hex digits, without formatting machinery (the `/metrics` encoder
    /// writes one per exemplar on every scrape).
    pub fn hex(&self) -> TraceIdHex {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = DIGITS[usize::from(b >> 4)];
            out[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
        }
        TraceIdHex(out)
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_the_formatted_bytes() {
        for seed in 0u8..=255 {
            let bytes: [u8; 16] =
                std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8 * 17));
            let Some(id) = TraceId::from_bytes(bytes) else {
                continue;
            };
            let slow: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(id.hex().as_str(), slow);
            assert_eq!(id.to_string(), slow);
        }
    }

    #[test]
    fn parses_32_hex_digits_only_and_writes_them_back_lowercase() {
        let id = TraceId::parse("0AF7651916CD43DD8448EB211C80319C").unwrap();
        assert_eq!(id.to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(TraceId::parse(&id.to_string()), Some(id));
        for bad in [
            "",
            "0af7651916cd43dd8448eb211c80319",
            "0af7651916cd43dd8448eb211c80319c0",
            "0af7651916cd43dd8448eb211c80319g",
            "00000000000000000000000000000000",
            "+af7651916cd43dd8448eb211c80319c",
            "0af7651916cd43dd8448eb211c8031é",
            "../../../../../../../etc/passwd.",
        ] {
            assert_eq!(TraceId::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            TraceId::of_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            Some(id)
        );
        assert_eq!(TraceId::of_traceparent("garbage"), None);
    }

    #[test]
    fn only_a_valid_w3c_traceparent_has_a_trace_id() {
        let id = "0af7651916cd43dd8448eb211c80319c";
        let good = [
            format!("00-{id}-b7ad6b7169203331-01"),
            format!("00-{id}-b7ad6b7169203331-00"),
            // A later version: its first four fields are read; more may follow after a '-'.
            format!("01-{id}-b7ad6b7169203331-01"),
            format!("cc-{id}-b7ad6b7169203331-01-what-the-future-holds"),
        ];
        for tp in &good {
            assert_eq!(
                TraceId::of_traceparent(tp)
                    .map(|t| t.to_string())
                    .as_deref(),
                Some(id),
                "{tp}"
            );
        }
        let bad = [
            // Version ff is invalid.
            format!("ff-{id}-b7ad6b7169203331-01"),
            // Hex is lower-case only.
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01".to_string(),
            format!("00-{id}-B7AD6B7169203331-01"),
            format!("0A-{id}-b7ad6b7169203331-01"),
            format!("00-{id}-b7ad6b7169203331-0F"),
            // All-zero trace id or parent id.
            "00-00000000000000000000000000000000-b7ad6b7169203331-01".to_string(),
            format!("00-{id}-0000000000000000-01"),
            // Wrong lengths, separators, extra fields on version 00.
            format!("00-{id}-b7ad6b716920333-01"),
            format!("00-{id}-b7ad6b7169203331-1"),
            format!("00-{id}-b7ad6b7169203331-01-extra"),
            format!("00-{id}-b7ad6b7169203331-01 "),
            format!("0-{id}-b7ad6b7169203331-01"),
            format!("00_{id}-b7ad6b7169203331-01"),
            format!("cc-{id}-b7ad6b7169203331-01x"),
            format!("00-{id}"),
            format!("xx-{id}-b7ad6b7169203331-01"),
        ];
        for tp in &bad {
            assert_eq!(TraceId::of_traceparent(tp), None, "{tp}");
        }
    }
}

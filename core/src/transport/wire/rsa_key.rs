//! The server's RSA public key, read from the PEM text it sends during
//! `caching_sha2_password`'s full authentication and `sha256_password`'s login.
//!
//! Read here rather than by `mysql_common`'s `PublicKey::from_pem`, which indexes into
//! the DER without checking lengths and panics on a key it cannot parse (bad base64, a
//! truncated element): a panic any server or proxy could cause at will, which the caller
//! had to catch, and an abort in a program built with `panic = "abort"`. Its arithmetic is still used, on the numbers
//! read here. The key's size is bounded too: an exponent or modulus of megabits would
//! make the encryption take minutes (`modpow`), a wait no lock call may have.

/// The largest modulus taken: MySQL makes 2048-bit keys; 16384 is far above any in use.
pub(super) const MAX_MODULUS_BITS: usize = 16384;
/// The largest public exponent taken: RSA keys use 65537 (17 bits), some 3.
pub(super) const MAX_EXPONENT_BITS: usize = 64;

/// The big-endian modulus and exponent of a PEM public key: `BEGIN PUBLIC KEY` (PKCS#8
/// SubjectPublicKeyInfo, what MySQL sends) or `BEGIN RSA PUBLIC KEY` (PKCS#1).
pub(super) fn read_public_key(pem: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let unreadable = || "the server sent an RSA public key this client cannot read".to_owned();
    let (der, pkcs1) = match (pem_body(pem, b"PUBLIC KEY"), pem_body(pem, b"RSA PUBLIC KEY")) {
        (Some(body), _) => (base64(body).ok_or_else(unreadable)?, false),
        (None, Some(body)) => (base64(body).ok_or_else(unreadable)?, true),
        (None, None) => return Err(unreadable()),
    };
    let mut der = Der(&der);
    let mut rsa = match pkcs1 {
        true => der.take(0x30),
        false => {
            // SubjectPublicKeyInfo: SEQUENCE { SEQUENCE { algorithm }, BIT STRING { key } }
            let mut info = der.take(0x30).ok_or_else(unreadable)?;
            info.take(0x30).ok_or_else(unreadable)?;
            let bits = info.take(0x03).ok_or_else(unreadable)?.0;
            match bits.split_first() {
                Some((0, key)) => Der(key).take(0x30),
                _ => None,
            }
        }
    }
    .ok_or_else(unreadable)?;
    let modulus = unsigned(rsa.take(0x02).ok_or_else(unreadable)?.0);
    let exponent = unsigned(rsa.take(0x02).ok_or_else(unreadable)?.0);
    let bits = |n: &[u8]| n.first().map_or(0, |&top| n.len() * 8 - top.leading_zeros() as usize);
    if bits(modulus) > MAX_MODULUS_BITS || bits(exponent) > MAX_EXPONENT_BITS || bits(modulus) < 2 {
        return Err(format!(
            "the server sent an RSA public key of {}-bit modulus and {}-bit exponent (taken: a modulus of at \
             most {MAX_MODULUS_BITS} bits, an exponent of at most {MAX_EXPONENT_BITS})",
            bits(modulus),
            bits(exponent)
        ));
    }
    Ok((modulus.to_vec(), exponent.to_vec()))
}

/// The text between `-----BEGIN {label}-----` and the `-----END {label}-----` after it.
fn pem_body<'a>(pem: &'a [u8], label: &[u8]) -> Option<&'a [u8]> {
    let begin = [b"-----BEGIN ", label, b"-----"].concat();
    let end = [b"-----END ", label, b"-----"].concat();
    let start = find(pem, &begin)? + begin.len();
    let len = find(&pem[start..], &end)?;
    Some(&pem[start..start + len])
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Standard base64 with padding; whitespace between the characters is skipped.
fn base64(text: &[u8]) -> Option<Vec<u8>> {
    let sextet = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let chars: Vec<u8> = text.iter().copied().filter(|c| !c.is_ascii_whitespace()).collect();
    let data = chars.strip_suffix(b"==").or_else(|| chars.strip_suffix(b"=")).unwrap_or(&chars);
    if !chars.len().is_multiple_of(4) || data.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    for group in data.chunks(4) {
        let mut word = 0u32;
        for &c in group {
            word = word << 6 | sextet(c)?;
        }
        word <<= 6 * (4 - group.len() as u32);
        out.extend_from_slice(&word.to_be_bytes()[1..group.len()]);
    }
    Some(out)
}

/// A DER reader over a slice: each `take` reads one element of the expected tag and
/// returns its contents.
struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    fn take(&mut self, tag: u8) -> Option<Der<'a>> {
        let (&found, rest) = self.0.split_first()?;
        let (&first, mut rest) = rest.split_first()?;
        if found != tag {
            return None;
        }
        let len = match first {
            0..=0x7F => usize::from(first),
            0x81..=0x84 => {
                let (bytes, after) = rest.split_at_checked(usize::from(first & 0x7F))?;
                rest = after;
                bytes.iter().fold(0usize, |acc, &b| acc << 8 | usize::from(b))
            }
            _ => return None,
        };
        let (contents, after) = rest.split_at_checked(len)?;
        self.0 = after;
        Some(Der(contents))
    }
}

/// An INTEGER's contents without the sign byte's leading zeros (a negative one reads as
/// its magnitude's bytes, and fails the size checks or the encryption's sense, never the
/// parse).
fn unsigned(integer: &[u8]) -> &[u8] {
    let zeros = integer.iter().take_while(|&&b| b == 0).count();
    &integer[zeros..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_every_padding() {
        assert_eq!(base64(b"TWFu").unwrap(), b"Man");
        assert_eq!(base64(b"TWE=").unwrap(), b"Ma");
        assert_eq!(base64(b"TQ==").unwrap(), b"M");
        assert_eq!(base64(b"TW\nFu").unwrap(), b"Man");
        assert!(base64(b"TWF").is_none());
        assert!(base64(b"T===").is_none());
        assert!(base64(b"TW!u").is_none());
    }

    /// A PKCS#1 PEM key of `modulus` and `exponent` (big-endian, positive).
    fn pkcs1_pem(modulus: &[u8], exponent: &[u8]) -> Vec<u8> {
        let element = |tag: u8, contents: &[u8]| {
            let mut out = vec![tag];
            match contents.len() {
                n @ 0..=0x7F => out.push(n as u8),
                n => {
                    out.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
                }
            }
            out.extend_from_slice(contents);
            out
        };
        let integers = [element(0x02, &[&[0][..], modulus].concat()), element(0x02, exponent)].concat();
        let der = element(0x30, &integers);
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut text = Vec::new();
        for group in der.chunks(3) {
            let word = group.iter().enumerate().fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                let sextet = (word >> (18 - 6 * i)) & 63;
                text.push(if i <= group.len() { alphabet[sextet as usize] } else { b'=' });
            }
        }
        [&b"-----BEGIN RSA PUBLIC KEY-----\n"[..], &text, b"\n-----END RSA PUBLIC KEY-----\n"].concat()
    }

    #[test]
    fn keys_are_read_within_their_size_bounds() {
        let modulus = [0xC5u8; 256]; // 2048 bits
        let (n, e) = read_public_key(&pkcs1_pem(&modulus, &[1, 0, 1])).unwrap();
        assert_eq!((n.as_slice(), e.as_slice()), (&modulus[..], &[1u8, 0, 1][..]));
        // An exponent of 65 bits would cost 65 multiplications; one of megabits, minutes.
        let e = read_public_key(&pkcs1_pem(&modulus, &[1; 9])).unwrap_err();
        assert!(e.contains("65-bit exponent"), "{e}");
        let e = read_public_key(&pkcs1_pem(&[0xC5; 2049], &[3])).unwrap_err();
        assert!(e.contains("16392-bit modulus"), "{e}");
    }

    #[test]
    fn truncated_or_oversized_keys_are_refused_without_a_panic() {
        for pem in [
            &b"-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----"[..],
            b"-----BEGIN PUBLIC KEY-----\nMA==\n-----END PUBLIC KEY-----",
            b"-----BEGIN PUBLIC KEY-----\nMIQ=\n-----END PUBLIC KEY-----",
            b"-----BEGIN RSA PUBLIC KEY-----\nMAYCAQACAQE=\n-----END RSA PUBLIC KEY-----",
            b"-----END PUBLIC KEY----------BEGIN PUBLIC KEY-----",
        ] {
            assert!(read_public_key(pem).is_err(), "{}", String::from_utf8_lossy(pem));
        }
    }
}

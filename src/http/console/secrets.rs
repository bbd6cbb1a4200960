//! The session's secrets handled with care: their digests, their comparison in constant time,
//! and their hex form.

use std::fmt::Write as _;

/// The SHA-256 of `bytes`: how the console keeps a session's id and its client token.
pub(super) fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// Whether two texts are equal, in time that does not depend on where they differ.
pub(super) fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// Bytes as lowercase hex digits.
pub(super) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

//! The leaves every folder above may use: how bytes read as hex, how an
//! error reads on one line ([`errors`]), the one escaping of untrusted text
//! ([`sanitize`]), private files and folders ([`private_fs`]), where
//! sentinel writes ([`out_dir`]) and a file's metadata stamp ([`file_stamp`]) and the hardening of a SQLite
//! connection to a database someone else wrote ([`harden`]), and the civil
//! calendar of UTC days and stamps ([`calendar`]).
//!
//! It owns those rules only; it imports nothing else of the crate and never
//! decides what is written where beyond the output folder's rules.

pub mod calendar;
pub mod errors;
pub mod file_stamp;
pub mod harden;
pub mod out_dir;
pub mod private_fs;
pub mod sanitize;

/// Lowercase hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    // By table, not `write!` per byte: the commit hexes two hashes a fire.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.extend_from_slice(&[DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 0xf)]]);
    }
    String::from_utf8(s).expect("hex digits are ASCII")
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_is_lowercase_two_digits_a_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(super::hex(&[]), "");
    }
}

//! New secrets, made one way: the daemon's bearer token, the dashboard's and the fleet console's
//! one-time sign-in codes and session cookies, the notification links' key. 256 bits each, from
//! the operating system's random source (`getrandom`), never a userspace generator.

/// 256 random bits, or why the OS would not give them.
pub fn try_key() -> Result<[u8; 32], getrandom::Error> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key)?;
    Ok(key)
}

/// A token or code: 256 random bits as 64 lowercase hex digits. Panics only when the OS has no
/// random source at all (then no secret here can be made, and nothing may go on without one).
pub fn token() -> String {
    hex::encode(try_key().expect("the operating system's random source"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_are_256_bits_of_hex_and_never_repeat() {
        let (a, b) = (super::token(), super::token());
        assert_eq!(a.len(), 64);
        assert!(
            a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{a}"
        );
        assert_ne!(a, b);
    }
}

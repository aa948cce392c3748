//! Event ids and timestamps. ULIDs are RECOMMENDED for ids (AEP-0001 §5, attribute 2): unique,
//! 26 characters, and they sort by creation time, which helps a human reading a log.

/// A fresh ULID.
pub fn new_id() -> String {
    ulid::Ulid::new().to_string()
}

/// Now, as RFC 3339 UTC with milliseconds (AEP-0001 §5 `time`; display only, never ordering).
pub fn now_rfc3339() -> String {
    crate::time::now_millis()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_ulids_and_unique() {
        let a = super::new_id();
        let b = super::new_id();
        assert_eq!(a.len(), 26);
        assert_ne!(a, b);
        assert!(super::now_rfc3339().ends_with('Z'));
    }
}

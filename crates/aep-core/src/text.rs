//! Text cut to a length people read: what the project shows of a command, a title, a path.

/// `text` with at most `keep` characters; when it is longer, the first `keep` and an ellipsis
/// saying where it was cut (so `keep + 1` characters in all). Counted in characters, never
/// splitting one.
pub fn cut(text: &str, keep: usize) -> String {
    match text.char_indices().nth(keep) {
        None => text.to_string(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// `text` in at most `max` characters all told: whole when it fits, else cut to `max - 1` and
/// the ellipsis (for a line of a fixed width).
pub fn fit(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some(_) => cut(text, max.saturating_sub(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::{cut, fit};

    #[test]
    fn a_fit_is_never_longer_than_asked_ellipsis_included() {
        assert_eq!(fit("12345", 5), "12345");
        assert_eq!(fit("123456", 5), "1234…");
        assert_eq!(fit("ééééé", 5), "ééééé");
        assert_eq!(fit("abc", 0), "…");
    }

    #[test]
    fn a_cut_keeps_whole_characters_and_says_where_it_was_made() {
        assert_eq!(cut("short", 5), "short");
        assert_eq!(cut("longer", 5), "longe…");
        assert_eq!(cut("ééééé", 2), "éé…");
        assert_eq!(cut("", 0), "");
        assert_eq!(cut("x", 0), "…");
    }
}

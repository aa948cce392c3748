//! Text as a person reads it: what the project shows of a command, a title, a path.
//!
//! [`visible`] is the one place where text from Cline, its tools and anyone who can post
//! Events is made safe to show: a person approving a command must see what will run, so
//! nothing that renders as nothing (zero-width characters, a byte-order mark, a soft hyphen),
//! nothing that reorders what follows (the bidi overrides and isolates) and no control
//! character reaches a screen as itself. Each is shown as its escape, `\u{202e}`. A newline
//! stays a real line break (a second line must read as a second line, never as a space); a
//! tab is escaped too (`\u{9}`), since it can push what follows out of a narrow view.
//!
//! [`shown`] cuts such text for a bounded view and says how much it left out, and where the
//! rest is: `… 57 more characters: see <link>`. [`cut`] and [`fit`] are the plain cuts, for
//! text that is not something a person approves (a title, a folder).

use std::borrow::Cow;

/// Whether `c` is shown as its escape rather than as itself: control characters (C0 but the
/// newline, DEL, C1), Unicode format characters (category Cf: the bidi controls U+202A-202E,
/// U+2066-2069, U+200E/F, U+061C; zero-width U+200B-200D, U+2060-2064, U+FEFF, U+00AD; the
/// tag characters U+E0000-E007F, ...), the line and paragraph separators, and the few other
/// characters that render as nothing (U+034F, U+115F/1160, U+3164, U+FFA0, U+180B-180F,
/// U+17B4/5).
pub fn escaped(c: char) -> bool {
    if c == '\n' {
        return false;
    }
    c.is_control()
        || matches!(c,
            '\u{00AD}'
            | '\u{034F}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E007F}')
}

/// `text` with every [`escaped`] character shown as `\u{..}` (lowercase hex, as Rust writes
/// it); newlines kept. Borrowed when there is nothing to escape. Applying it twice changes
/// nothing more.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape_where(text, escaped)
}

/// [`visible`] on one line: the newline escaped as well (`\u{a}`), for a table cell or a log
/// line, where a real break would be read as another row.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| c == '\n' || escaped(c))
}

fn escape_where(text: &str, hide: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.contains(&hide) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hide(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Text made [`visible`] and bounded: at most `keep` characters of it are shown (an escape is
/// never split: it is shown whole or not at all), and `hidden` counts the characters of the
/// original text left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub text: String,
    pub hidden: usize,
}

/// `text` [`visible`] (or [`visible_line`] when `one_line`), cut to `keep` shown characters.
pub fn shown(text: &str, keep: usize, one_line: bool) -> Shown {
    let mut out = String::new();
    let mut used = 0;
    for (at, c) in text.char_indices() {
        let hide = escaped(c) || (one_line && c == '\n');
        let width = if hide { c.escape_unicode().count() } else { 1 };
        if used + width > keep {
            return Shown {
                text: out,
                hidden: text[at..].chars().count(),
            };
        }
        used += width;
        if hide {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Shown { text: out, hidden: 0 }
}

impl Shown {
    /// The text, and when something was left out, how much and where all of it is shown:
    /// `… 57 more characters: see https://…` (or `: see Cline`), `… 57 more characters` when
    /// the caller knows no such place.
    pub fn told(&self, whole_at: Option<&str>) -> String {
        match (self.hidden, whole_at) {
            (0, _) => self.text.clone(),
            (n, Some(at)) => format!("{}… {n} more {}: see {at}", self.text, characters(n)),
            (n, None) => format!("{}… {n} more {}", self.text, characters(n)),
        }
    }
}

fn characters(n: usize) -> &'static str {
    if n == 1 {
        "character"
    } else {
        "characters"
    }
}

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
    use super::{cut, fit, shown, visible, visible_line, Shown};

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

    #[test]
    fn what_renders_as_nothing_or_reorders_is_shown_as_its_escape() {
        // The right-to-left override: `ls \u{202e}txt.exe` would read `ls exe.txt`.
        assert_eq!(visible("ls \u{202e}txt.exe"), "ls \\u{202e}txt.exe");
        assert_eq!(visible("rm\u{200b} -rf"), "rm\\u{200b} -rf");
        assert_eq!(visible("\u{feff}echo"), "\\u{feff}echo");
        assert_eq!(visible("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(visible("soft\u{ad}hyphen"), "soft\\u{ad}hyphen");
        for c in [
            '\u{202a}',
            '\u{202b}',
            '\u{202c}',
            '\u{202d}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200e}',
            '\u{200f}',
            '\u{061c}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{e0041}',
            '\u{2028}',
            '\r',
            '\t',
            '\u{7f}',
            '\u{85}',
            '\u{9b}',
            '\0',
        ] {
            let text = format!("x{c}y");
            assert_eq!(visible(&text), format!("x\\u{{{:x}}}y", c as u32), "{:x}", c as u32);
        }
        // What reads as itself is left alone, and is borrowed, not copied.
        for plain in ["echo héllo 日本 ✓ 👍", "a\\u{202e}b", ""] {
            assert!(matches!(visible(plain), std::borrow::Cow::Borrowed(_)), "{plain}");
        }
        let once = visible("\u{202e}x\ny").into_owned();
        assert_eq!(visible(&once), once, "escaping twice changes nothing more");
    }

    #[test]
    fn a_newline_stays_a_line_break_except_on_one_line() {
        assert_eq!(visible("echo line-one\ntouch X"), "echo line-one\ntouch X");
        assert_eq!(visible("a\r\nb"), "a\\u{d}\nb");
        assert_eq!(visible_line("echo line-one\ntouch X"), "echo line-one\\u{a}touch X");
    }

    #[test]
    fn a_long_command_is_cut_with_the_count_of_what_is_hidden_and_where_it_is() {
        let command = format!("echo {}; touch /tmp/TAIL_RAN", "a".repeat(231));
        assert_eq!(command.chars().count(), 257);
        let s = shown(&command, 200, false);
        assert_eq!(s.text.chars().count(), 200);
        assert_eq!(s.hidden, 57);
        assert_eq!(
            s.told(Some("https://box/notify/t")),
            format!("{}… 57 more characters: see https://box/notify/t", &command[..200])
        );
        assert!(s.told(None).ends_with("aaa… 57 more characters"));
        assert_eq!(
            shown(&command, 257, false),
            Shown {
                text: command.clone(),
                hidden: 0
            }
        );
        assert_eq!(shown(&command, 257, false).told(Some("x")), command, "whole: no note");
        assert_eq!(
            shown("ab", 1, false).told(Some("Cline")),
            "a… 1 more character: see Cline"
        );
    }

    #[test]
    fn a_cut_never_splits_an_escape_and_counts_original_characters() {
        // `ab\u{202e}cd`: the escape is 8 characters shown; a budget of 5 cannot hold it.
        let s = shown("ab\u{202e}cd", 5, false);
        assert_eq!((s.text.as_str(), s.hidden), ("ab", 3));
        let s = shown("ab\u{202e}cd", 10, false);
        assert_eq!((s.text.as_str(), s.hidden), ("ab\\u{202e}", 2));
        let s = shown("a\nb", 10, true);
        assert_eq!((s.text.as_str(), s.hidden), ("a\\u{a}b", 0));
        let s = shown("ééé", 2, false);
        assert_eq!((s.text.as_str(), s.hidden), ("éé", 1));
    }
}

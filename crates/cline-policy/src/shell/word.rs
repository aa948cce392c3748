//! A word's text as the shell passes it: quotes removed and escapes undone, in each of bash's
//! quoting forms; and the line continuations bash removes before it reads a line at all.

/// Removes every backslash-newline outside single quotes (and `$'..'`), as bash does before it
/// splits a line into words: `r\<newline>m` is `rm`.
pub fn join_continued_lines(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("\\\n") {
        return std::borrow::Cow::Borrowed(text);
    }
    #[derive(PartialEq)]
    enum In {
        Plain,
        Single,
        Double,
        AnsiC,
    }
    let mut state = In::Plain;
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (&state, c) {
            (In::Single, '\'') | (In::AnsiC, '\'') | (In::Double, '"') => state = In::Plain,
            (In::Plain, '\'') => state = In::Single,
            (In::Plain, '"') => state = In::Double,
            (In::Plain, '$') if chars.peek() == Some(&'\'') => {
                out.push(c);
                out.extend(chars.next());
                state = In::AnsiC;
                continue;
            }
            (In::Plain | In::Double, '\\') if chars.peek() == Some(&'\n') => {
                chars.next();
                continue;
            }
            (In::Plain | In::Double | In::AnsiC, '\\') => {
                out.push(c);
                out.extend(chars.next());
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    std::borrow::Cow::Owned(out)
}

/// The scripts of backtick substitutions in `text` the grammar left as text (inside `${..}`,
/// in a here-document's body): `None` when a backtick is left open.
pub fn backtick_scripts(text: &str) -> Option<Vec<String>> {
    let mut scripts = Vec::new();
    let mut chars = text.chars();
    let mut open: Option<String> = None;
    while let Some(c) = chars.next() {
        match (c, &mut open) {
            ('\\', Some(script)) => {
                // Inside backticks, `\`` is a backtick of the script.
                match chars.next() {
                    Some(n @ ('`' | '\\' | '$')) => script.push(n),
                    Some(n) => {
                        script.push('\\');
                        script.push(n);
                    }
                    None => {}
                }
            }
            ('\\', None) => {
                chars.next();
            }
            ('`', Some(_)) => scripts.extend(open.take()),
            ('`', None) => open = Some(String::new()),
            (c, Some(script)) => script.push(c),
            (_, None) => {}
        }
    }
    match open {
        Some(_) => None,
        None => Some(scripts),
    }
}

/// An unquoted word's escapes undone: `r\m` is `rm`, a backslash-newline joins lines.
pub(super) fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            },
            c => out.push(c),
        }
    }
    out
}

/// In double quotes a backslash escapes only `$`, backtick, `"`, `\` and a newline.
pub(super) fn unescape_in_double(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => out.push(chars.next().unwrap_or('\\')),
                Some('\n') => {
                    chars.next();
                }
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `$'..'` decoded as bash does for the escapes that make names (`\x72\x6d` is `rm`).
pub(super) fn ansi_c(text: &str) -> String {
    let body = text.strip_prefix("$'").unwrap_or(text);
    let body = body.strip_suffix('\'').unwrap_or(body);
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    let take = |chars: &mut std::iter::Peekable<std::str::Chars>, radix: u32, max: usize| {
        let mut value = 0u32;
        let mut n = 0;
        while n < max {
            match chars.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    value = value * radix + d;
                    chars.next();
                    n += 1;
                }
                None => break,
            }
        }
        (n > 0).then_some(value)
    };
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('e' | 'E') => out.push('\x1b'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some('x') => match take(&mut chars, 16, 2) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\x"),
            },
            Some('u') => match take(&mut chars, 16, 4) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\u"),
            },
            Some('U') => match take(&mut chars, 16, 8) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\U"),
            },
            Some(d @ '0'..='7') => {
                let mut v = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(n) => {
                            v = v * 8 + n;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.extend(char::from_u32(v));
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_continuations_go_before_the_line_is_read() {
        assert_eq!(join_continued_lines("r\\\nm -rf x"), "rm -rf x");
        assert_eq!(join_continued_lines("echo 'a\\\nb'"), "echo 'a\\\nb'");
        assert_eq!(join_continued_lines("echo \"a\\\nb\""), "echo \"ab\"");
        assert_eq!(join_continued_lines("a\\\\\nb"), "a\\\\\nb");
        assert_eq!(join_continued_lines("echo \\' r\\\nm"), "echo \\' rm");
        assert_eq!(join_continued_lines("echo \"it's\" r\\\nm"), "echo \"it's\" rm");
        assert_eq!(join_continued_lines("echo $'a\\'' r\\\nm"), "echo $'a\\'' rm");
    }

    #[test]
    fn backticks_left_as_text_are_found() {
        assert_eq!(
            backtick_scripts("a `rm -rf x` b `ls`"),
            Some(vec!["rm -rf x".to_string(), "ls".to_string()])
        );
        assert_eq!(backtick_scripts("no ticks"), Some(vec![]));
        assert_eq!(backtick_scripts("\\`not\\`"), Some(vec![]));
        assert_eq!(backtick_scripts("`open"), None);
    }

    #[test]
    fn escapes_are_undone_as_bash_does() {
        assert_eq!(unescape("r\\m"), "rm");
        assert_eq!(ansi_c("$'\\x72\\x6d'"), "rm");
        assert_eq!(unescape_in_double("a\\$b\\c"), "a$b\\c");
    }
}

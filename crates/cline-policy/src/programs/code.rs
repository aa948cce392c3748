//! Code the policy can read: sed scripts and awk programs in their plain forms (no command
//! that writes a file or runs one), and arithmetic on numbers alone. Anything else is code the
//! policy does not read: an approve rule must name it, a deny rule fears it.

/// Whether `script` (the program text given to `program`, sed or awk) is plain.
pub fn is_plain(program: &str, script: &str) -> bool {
    match program {
        p if p.ends_with("sed") => sed_is_plain(script),
        p if p.ends_with("awk") => awk_is_plain(script),
        _ => false,
    }
}

/// Arithmetic that evaluates numbers only: a name there is a variable whose value is itself
/// evaluated, and `a[$(cmd)]` in it runs `cmd`.
pub fn arithmetic_is_plain(text: &str) -> bool {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '0' if chars.peek().is_some_and(|n| *n == 'x' || *n == 'X') => {
                chars.next();
                while chars.peek().is_some_and(char::is_ascii_hexdigit) {
                    chars.next();
                }
            }
            c if c.is_ascii_digit() || c.is_whitespace() => {}
            c if "+-*/%()<>=!&|^~?:,".contains(c) => {}
            _ => return false,
        }
    }
    true
}

/// A sed script of commands that print, delete, substitute, branch and read (no `w`, `W`,
/// `e`, nor the `w` and `e` flags of `s`).
fn sed_is_plain(script: &str) -> bool {
    let s: Vec<char> = script.chars().collect();
    let mut i = 0;
    // Skips a delimited part (`/re/`, the pieces of `s` and `y`), backslash escapes honoured.
    let delimited = |i: &mut usize, d: char| -> bool {
        while *i < s.len() {
            match s[*i] {
                '\\' => *i += 2,
                c if c == d => {
                    *i += 1;
                    return true;
                }
                '\n' if d != '\n' => return false,
                _ => *i += 1,
            }
        }
        false
    };
    loop {
        while i < s.len() && (s[i].is_whitespace() || s[i] == ';') {
            i += 1;
        }
        if i >= s.len() {
            return true;
        }
        // Addresses: numbers, $, /re/, \cREc, first~step, ranges, !.
        for _ in 0..2 {
            match s.get(i) {
                Some(c) if c.is_ascii_digit() => {
                    while i < s.len() && (s[i].is_ascii_digit() || s[i] == '~') {
                        i += 1;
                    }
                }
                Some('$') => i += 1,
                Some('/') => {
                    i += 1;
                    if !delimited(&mut i, '/') {
                        return false;
                    }
                    while i < s.len() && (s[i] == 'I' || s[i] == 'M') {
                        i += 1;
                    }
                }
                Some('\\') => {
                    let Some(&d) = s.get(i + 1) else { return false };
                    i += 2;
                    if !delimited(&mut i, d) {
                        return false;
                    }
                }
                Some('+' | '~') => {
                    i += 1;
                    while i < s.len() && s[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                _ => {}
            }
            if s.get(i) == Some(&',') {
                i += 1;
            } else {
                break;
            }
        }
        while i < s.len() && (s[i].is_whitespace() || s[i] == '!') {
            i += 1;
        }
        let Some(&c) = s.get(i) else { return false };
        i += 1;
        match c {
            '{' | '}' | 'p' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'x' | 'n' | 'N' | 'P' | 'z' | '=' | 'F' => {}
            'l' | 'q' | 'Q' | 'L' => {
                while i < s.len() && (s[i].is_ascii_digit() || s[i] == ' ') {
                    i += 1;
                }
            }
            ':' | 'b' | 't' | 'T' | 'v' | '#' | 'a' | 'i' | 'c' | 'r' | 'R' => {
                // A label, a version, a comment, text written out, a file read: to the line's end
                // (labels and versions also end at `;`).
                let to_semicolon = matches!(c, 'b' | 't' | 'T' | 'v');
                while i < s.len() && s[i] != '\n' && !(to_semicolon && (s[i] == ';' || s[i] == '}')) {
                    if s[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            's' | 'y' => {
                let Some(&d) = s.get(i) else { return false };
                if d == '\n' || d == '\\' {
                    return false;
                }
                i += 1;
                if !delimited(&mut i, d) || !delimited(&mut i, d) {
                    return false;
                }
                if c == 's' {
                    while i < s.len() && !matches!(s[i], ';' | '}' | '\n' | ' ') {
                        if !"gpiImM0123456789".contains(s[i]) {
                            return false;
                        }
                        i += 1;
                    }
                }
            }
            _ => return false,
        }
    }
}

/// An awk program that neither runs (`system`, a pipe) nor writes (`print > file`) nor loads
/// code (`@load`, `@include`).
fn awk_is_plain(program: &str) -> bool {
    // Strings out first: what they hold is data.
    let mut text = String::with_capacity(program.len());
    let mut chars = program.chars().peekable();
    let mut last = '\n';
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(n) = chars.next() {
                    match n {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                text.push_str("\"\"");
                last = '"';
            }
            // A regex literal where an operand is expected.
            '/' if "(,~!&|;{}\n=".contains(last) || last.is_whitespace() && regex_may_start(&text) => {
                while let Some(n) = chars.next() {
                    match n {
                        '\\' => {
                            chars.next();
                        }
                        '/' => break,
                        '\n' => return false,
                        _ => {}
                    }
                }
                text.push_str("//");
                last = '/';
            }
            c => {
                text.push(c);
                if !c.is_whitespace() {
                    last = c;
                }
            }
        }
    }
    if text.contains("system") || text.contains('@') || text.contains('`') {
        return false;
    }
    let t = text.replace("||", "  ");
    if t.contains('|') {
        return false;
    }
    // `>` is output to a file in a print statement outside parentheses, else a comparison.
    for (at, _) in t.match_indices("print") {
        let mut depth = 0i32;
        for c in t[at..].chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ';' | '}' | '\n' if depth <= 0 => break,
                '>' if depth <= 0 => return false,
                _ => {}
            }
        }
    }
    true
}

/// Before a `/` after blanks: a regex when what came before cannot end an operand.
fn regex_may_start(before: &str) -> bool {
    let trimmed = before.trim_end();
    trimmed.is_empty()
        || trimmed.ends_with(|c: char| "(,~!&|;{}=".contains(c))
        || ["print", "printf", "return", "in"].iter().any(|k| trimmed.ends_with(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts_that_write_or_run_are_not_plain() {
        for plain in [
            "s/a/b/g",
            "-n",
            "1,5p",
            "/foo/d",
            "s|x|y|; s/a\\/b/c/2",
            "$!N; P; D",
            "y/abc/xyz/",
            "/start/,/end/{s/x/y/;p}",
            "1~2d",
            "s/a/b/I",
            "r other.txt",
            "10q",
        ] {
            assert!(sed_is_plain(plain) || plain == "-n", "{plain}");
        }
        for acting in [
            "w out.txt",
            "s/a/b/w out",
            "s/a/b/e",
            "e rm -rf victim",
            "1e touch x",
            "/x/W file",
            "s/x/y/gw f",
            "s/a/b",
            "k",
            "s\na\nb\n",
        ] {
            assert!(!sed_is_plain(acting), "{acting}");
        }
    }

    #[test]
    fn awk_programs_that_run_or_write_are_not_plain() {
        for plain in [
            "{print $1}",
            "$3 > 100",
            "{ if ($1 > 2) print $2 }",
            "BEGIN{FS=\":\"} {print $1 | 0}".replace(" | 0", "").as_str(),
            "/a|b/ {print}",
            "{print (a > b)}",
            "NR==1 || NR==2",
            "{ print \"x > y | z\" }",
        ] {
            assert!(awk_is_plain(plain), "{plain}");
        }
        for acting in [
            "BEGIN{system(\"rm -rf victim\")}",
            "{print > \"out\"}",
            "{print $1 >> \"/tmp/x\"}",
            "{print | \"sh\"}",
            "BEGIN{\"id\" | getline x}",
            "@load \"x\"",
            "{printf \"%s\", $0 > FILENAME}",
        ] {
            assert!(!awk_is_plain(acting), "{acting}");
        }
    }

    #[test]
    fn arithmetic_on_names_is_not_plain() {
        assert!(arithmetic_is_plain("1 + 2 * (3 - 0x1f)"));
        assert!(!arithmetic_is_plain("x + 1"));
        assert!(!arithmetic_is_plain("a[$(rm -rf x)]"));
        assert!(!arithmetic_is_plain("$y"));
    }
}

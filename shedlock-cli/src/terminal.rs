//! Lock names, holders and whatever else the store returns were written by other programs:
//! before such text reaches a terminal, every character the terminal would act on instead of
//! showing (ESC and the other C0 controls, DEL, the C1 controls, bidirectional overrides and
//! isolates, line and paragraph separators) is written as its Rust escape, `\u{1b}`, `\r`….
//! A backslash stays as it is: the text stays readable, and `--json` gives the exact value.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// Whether a terminal could act on `c` (move the cursor, change colours or the title, reorder
/// the line) rather than show it.
pub(crate) fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// A value shown with every unsafe character escaped, line breaks included: for one cell or
/// field of text output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Escaped<'a>(pub(crate) &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_escaped(f, self.0, |_| false)
    }
}

/// A message of one or more lines, every unsafe character but the line breaks escaped.
pub(crate) fn escape_lines(text: &str) -> Cow<'_, str> {
    escape_with(text, |c| c == '\n')
}

/// Serialized JSON with the unsafe characters that serde_json leaves as they are (DEL, C1,
/// bidirectional controls; it escapes the C0 ones) written as `\uXXXX`: the same value for a
/// JSON reader, nothing for a terminal. They can only occur inside strings, where such an
/// escape is valid.
pub(crate) fn escape_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| is_unsafe(c) && c != '\n') {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe(c) && c != '\n' {
            // Every unsafe character is in the Basic Multilingual Plane: one escape each.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape_with(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let _ = write_escaped(&mut out, text, keep);
    Cow::Owned(out)
}

fn write_escaped(
    out: &mut impl fmt::Write,
    text: &str,
    keep: impl Fn(char) -> bool,
) -> fmt::Result {
    for c in text.chars() {
        if is_unsafe(c) && !keep(c) {
            write!(out, "{}", c.escape_debug())?;
        } else {
            out.write_char(c)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "a\u{1b}]0;x\u{7}b\rc\nd\u{9b}31m\u{202e}e\u{7f}";

    #[test]
    fn values_lose_every_terminal_control() {
        let shown = Escaped(HOSTILE).to_string();
        assert_eq!(shown, r"a\u{1b}]0;x\u{7}b\rc\nd\u{9b}31m\u{202e}e\u{7f}");
        assert!(!shown.chars().any(is_unsafe), "{shown}");
        assert_eq!(Escaped("web-1:4121").to_string(), "web-1:4121");
    }

    #[test]
    fn messages_keep_their_lines() {
        assert_eq!(escape_lines("one\ntwo\u{1b}[2J"), "one\ntwo\\u{1b}[2J");
        assert!(matches!(escape_lines("plain\ntext"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_stays_json_and_the_value_stays_the_same() {
        let json = serde_json::to_string_pretty(&serde_json::json!({ "name": HOSTILE })).unwrap();
        let escaped = escape_json(&json);
        assert!(
            !escaped.chars().any(|c| is_unsafe(c) && c != '\n'),
            "{escaped}"
        );
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back["name"], HOSTILE);
    }
}

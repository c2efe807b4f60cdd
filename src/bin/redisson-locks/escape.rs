//! What anyone could have written reaches the operator's terminal escaped.
//!
//! Lock names, owner fields, identities and permit ids come from Redis, where
//! any client with write access put them. Printed raw, an escape sequence in
//! a name would drive the operator's terminal (retitle it, hide text, move
//! the cursor), a newline would add a false row to `list`, and a
//! right-to-left override would show a name other than the one there. In text
//! output each such character is written as a Rust-style escape (`\n`,
//! `\u{1b}`), and a backslash as `\\`, so what is printed says exactly what
//! is stored and nothing else. `--json` needs none of this: JSON escapes
//! control characters itself.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every character a terminal would act on, rather than show,
/// escaped: control characters (newlines and tabs included), the
/// bidirectional controls, and `\` itself.
pub(crate) fn escaped(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// The same for a message of several lines of the tool's own: its newlines
/// stay, everything else is escaped.
pub(crate) fn escaped_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    let acts = |c: char| c == '\\' || (needs_escape(c) && !(keep_newlines && c == '\n'));
    if !text.chars().any(acts) {
        return text.into();
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => shown.push('\n'),
            '\\' if keep_newlines => shown.push('\\'),
            '\\' => shown.push_str("\\\\"),
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c if needs_escape(c) => {
                let _ = write!(shown, "\\u{{{:x}}}", u32::from(c));
            }
            c => shown.push(c),
        }
    }
    shown.into()
}

/// Control characters (C0, DEL, C1) and the characters that reorder
/// bidirectional text (the Trojan Source set).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_terminal_would_act_on_is_shown_escaped() {
        assert_eq!(escaped("orders:42"), "orders:42");
        assert!(matches!(escaped("orders:42"), Cow::Borrowed(_)));
        assert_eq!(escaped("a\u{1b}]0;pwned\u{7}b"), "a\\u{1b}]0;pwned\\u{7}b");
        assert_eq!(escaped("x\ny\tz\r"), "x\\ny\\tz\\r");
        assert_eq!(escaped("evil\u{202e}gnp.exe"), "evil\\u{202e}gnp.exe");
        assert_eq!(escaped("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escaped("back\\slash"), "back\\\\slash");
        assert_eq!(escaped("über"), "über");
    }

    #[test]
    fn a_message_keeps_its_own_lines() {
        assert_eq!(escaped_lines("one\ntwo \u{1b}[2J"), "one\ntwo \\u{1b}[2J");
        assert_eq!(escaped_lines("C:\\path"), "C:\\path");
    }
}

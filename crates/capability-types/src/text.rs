//! Text from a call, a manifest or a plugin's sources, made safe to show a person.

/// `text` as a person should see it in an approval prompt, a message or a report: every character that
/// could change what the rest of the text looks like is written as an escape, so that an
/// agent's argument cannot clear a terminal, move its cursor, start a line that looks like
/// another subject, or reverse how the text reads. Escaped: control characters (C0, DEL, C1:
/// `\n`, `\r`, `\t` by name, the rest as `\u{1b}`), the bidirectional embeddings,
/// overrides, isolates and marks, the zero-width and invisible formatting characters, the
/// line and paragraph separators, and the backslash itself (so that an escape in the text is
/// never mistaken for one made here). Other text is shown as it is.
///
/// ```
/// use capability_types::shown;
/// assert_eq!(shown("/srv/a.txt"), "/srv/a.txt");
/// assert_eq!(shown("a\u{1b}[2J\nb\u{202e}c\\d"), "a\\u{1b}[2J\\nb\\u{202e}c\\\\d");
/// ```
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    fn hidden(c: char) -> bool {
        c == '\\'
            || c.is_control()
            || matches!(
                c,
                '\u{061c}'
                    | '\u{200b}'..='\u{200f}'
                    | '\u{2028}'..='\u{202e}'
                    | '\u{2060}'..='\u{2064}'
                    | '\u{2066}'..='\u{2069}'
                    | '\u{feff}'
            )
    }
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

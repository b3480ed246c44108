//! Text from a call, a manifest or a plugin's sources, made safe to show a person.

/// `text` as a person should see it in an approval prompt, a message or a report: every character that
/// could change what the rest of the text looks like, or that a terminal draws as nothing while
/// a program (a model among them) reads it, is written as an escape, so that an agent's
/// argument or a server's tool description cannot clear a terminal, move its cursor, start a
/// line that looks like another subject, reverse how the text reads, or say words its reader
/// does not see. Escaped: control characters (C0, DEL, C1: `\n`, `\r`, `\t` by name, the rest
/// as `\u{1b}`), Unicode's format characters (the bidirectional embeddings, overrides, isolates
/// and marks, the zero-width and invisible operators, the soft hyphen, the tags that spell
/// ASCII unseen, …), the variation selectors, the combining grapheme joiner, the fillers drawn
/// as blanks, the line and paragraph separators, and the backslash itself (so that an escape in
/// the text is never mistaken for one made here). Other text is shown as it is.
///
/// ```
/// use capability_types::shown;
/// assert_eq!(shown("/srv/a.txt"), "/srv/a.txt");
/// assert_eq!(shown("a\u{1b}[2J\nb\u{202e}c\\d"), "a\\u{1b}[2J\\nb\\u{202e}c\\\\d");
/// // "Hi" in Unicode tags: drawn as nothing, read by a model.
/// assert_eq!(shown("ok\u{e0048}\u{e0069}"), "ok\\u{e0048}\\u{e0069}");
/// ```
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    fn hidden(c: char) -> bool {
        c == '\\'
            || c.is_control()
            || matches!(
                u32::from(c),
                // Format characters (general category Cf), and the soft hyphen among them.
                0x00ad
                    | 0x0600..=0x0605
                    | 0x061c
                    | 0x06dd
                    | 0x070f
                    | 0x0890..=0x0891
                    | 0x08e2
                    | 0x180e
                    | 0x200b..=0x200f
                    | 0x2028..=0x202e
                    | 0x2060..=0x206f
                    | 0xfeff
                    | 0xfff9..=0xfffb
                    | 0x110bd
                    | 0x110cd
                    | 0x13430..=0x1343f
                    | 0x1bca0..=0x1bca3
                    | 0x1d173..=0x1d17a
                    // Plane 14: the tags and the variation selectors supplement.
                    | 0xe0000..=0xe0fff
                    // Variation selectors, the combining grapheme joiner, Mongolian and Khmer
                    // marks without a shape, and the Hangul fillers drawn as blanks.
                    | 0xfe00..=0xfe0f
                    | 0x034f
                    | 0x180b..=0x180d
                    | 0x180f
                    | 0x17b4..=0x17b5
                    | 0x115f..=0x1160
                    | 0x3164
                    | 0xffa0
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

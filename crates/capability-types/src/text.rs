//! Text from a call, a manifest or a plugin's sources, made safe to show a person.

/// `text` as a person should see it in an approval prompt, a message or a report: a character
/// that could change how the rest looks, or that a terminal draws as nothing while a program (a
/// model) reads it, is written as an escape, so that an agent's argument or a server's tool
/// description cannot clear a terminal, move its cursor, start a line that looks like another
/// subject, reverse how the text reads, or say words its reader does not see. Escaped: control characters (`\n`, `\r`, `\t` by name, the rest as `\u{1b}`),
/// Unicode's format characters (bidirectional controls, zero-width characters, the soft hyphen,
/// the tags that spell ASCII unseen, …), the variation selectors, the combining grapheme joiner,
/// the blank fillers, the line and paragraph separators, and the backslash itself (so an escape
/// in the text is never mistaken for one made here). Other text is shown as it is.
///
/// ```
/// use capability_types::shown;
/// assert_eq!(shown("/srv/a.txt"), "/srv/a.txt");
/// assert_eq!(shown("a\u{1b}[2J\nb\u{202e}c\\d"), "a\\u{1b}[2J\\nb\\u{202e}c\\\\d");
/// // "Hi" in Unicode tags: drawn as nothing, read by a model.
/// assert_eq!(shown("ok\u{e0048}\u{e0069}"), "ok\\u{e0048}\\u{e0069}");
/// ```
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || unseen(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unseen(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `text` with every character [`shown`] escapes but the line break, the tab and the backslash
/// written as an escape (`\u{e0049}`), the rest as it is: for text a model is handed that a
/// person must be able to read the same, a guarded MCP server's tool descriptions among it, so
/// that words spelt in characters a terminal draws as nothing reach neither unseen.
///
/// ```
/// use capability_types::visible;
/// assert_eq!(visible("Reads a file.\nC:\\x"), "Reads a file.\nC:\\x");
/// assert_eq!(visible("ok\u{e0048}\u{e0069}\r"), "ok\\u{e0048}\\u{e0069}\\u{d}");
/// ```
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    let hides = |c: char| unseen(c) && c != '\n' && c != '\t';
    if !text.chars().any(hides) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hides(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether `c` changes how what follows looks, or is drawn as nothing though a program reads
/// it: a control character, or one of [`UNSEEN`].
fn unseen(c: char) -> bool {
    c.is_control() || drawn_as_nothing(c)
}

/// Whether `c` is one of [`UNSEEN`]: drawn as nothing, and skipped by the file systems that
/// skip Unicode's default-ignorable code points ([`fold_name`](crate::fold_name)).
pub(crate) fn drawn_as_nothing(c: char) -> bool {
    UNSEEN
        .iter()
        .any(|&(first, last)| (first..=last).contains(&u32::from(c)))
}

/// Unseen but read (inclusive ranges): the format characters (general category Cf, the soft
/// hyphen and plane 14's tags among them), the line and paragraph separators, the variation
/// selectors, the combining grapheme joiner, shapeless Mongolian and Khmer marks, the fillers.
#[rustfmt::skip]
const UNSEEN: &[(u32, u32)] = &[
    (0xad, 0xad), (0x34f, 0x34f), (0x600, 0x605), (0x61c, 0x61c), (0x6dd, 0x6dd),
    (0x70f, 0x70f), (0x890, 0x891), (0x8e2, 0x8e2), (0x115f, 0x1160), (0x17b4, 0x17b5),
    (0x180b, 0x180f), (0x200b, 0x200f), (0x2028, 0x202e), (0x2060, 0x206f), (0x3164, 0x3164),
    (0xfe00, 0xfe0f), (0xfeff, 0xfeff), (0xffa0, 0xffa0), (0xfff9, 0xfffb), (0x110bd, 0x110bd),
    (0x110cd, 0x110cd), (0x13430, 0x1343f), (0x1bca0, 0x1bca3), (0x1d173, 0x1d17a),
    (0xe0000, 0xe0fff),
];

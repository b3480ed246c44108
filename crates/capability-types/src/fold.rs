//! Names as the file systems that do not tell them apart read them (docs/policy.md, "Names in
//! any case"): one spelling for every spelling such a file system takes for the same name, so
//! that a place toolcap protects by name is found however it is written.

use std::borrow::Cow;

/// `name` (one path component) as a file system that does not tell names apart takes it:
///
/// - letters in lower case: ASCII's, and the letters that fold or upcase onto them, the long
///   `ſ` (s) and the Kelvin sign `\u{212A}` (k) as Linux's casefold folds them, the dotless
///   `ı` (i) as Windows upcases it, the ligatures `ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ` and `ß`, `ẞ` (ss) as full
///   case folding writes them out; every other letter as a case table takes it (`DONNÉES`
///   is `données`);
/// - without the characters a terminal draws as nothing (zero-width spaces and joiners,
///   direction marks, a byte-order mark, a soft hyphen, variation selectors, tags: Unicode's
///   default-ignorable code points and the other format characters), which HFS+ and Linux's
///   casefold before 6.12 skip;
/// - without trailing dots and spaces, which Windows drops (a name of nothing else is kept).
///
/// Bytes that are not UTF-8 are kept as they are. Borrowed when `name` is already so.
///
/// ```
/// use capability_types::fold_name;
/// assert_eq!(&*fold_name(".G\u{131}T".as_bytes()), b".git");
/// assert_eq!(&*fold_name(".ba\u{17F}hrc".as_bytes()), b".bashrc");
/// assert_eq!(&*fold_name(".cla\u{200D}ude ".as_bytes()), b".claude");
/// assert_eq!(&*fold_name(b".."), b"..");
/// assert!(matches!(fold_name(b"notes.md"), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn fold_name(name: &[u8]) -> Cow<'_, [u8]> {
    if name.iter().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) && !trailing(name) {
        return Cow::Borrowed(name);
    }
    let mut out = Vec::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            fold_char(c, &mut out);
        }
        out.extend_from_slice(chunk.invalid());
    }
    let kept = out.len()
        - out
            .iter()
            .rev()
            .take_while(|b| matches!(b, b'.' | b' '))
            .count();
    if kept > 0 {
        out.truncate(kept);
    }
    // A name of nothing but what folding drops is no name, and `.` and `..` are the path's own:
    // such a name stays as it is, so that folding never takes a path elsewhere.
    if out.is_empty() || out == b"." || out == b".." {
        return Cow::Borrowed(name);
    }
    Cow::Owned(out)
}

/// [`fold_name`] of each component of `path` (its `/`s kept where they are, so the folded path
/// has as many components as `path`).
///
/// ```
/// use capability_types::fold_path;
/// assert_eq!(&*fold_path("/srv/.G\u{131}t/HOOKS".as_bytes()), b"/srv/.git/hooks");
/// ```
pub fn fold_path(path: &[u8]) -> Cow<'_, [u8]> {
    let plain = path.iter().all(|b| b.is_ascii() && !b.is_ascii_uppercase());
    if plain && !path.split(|b| *b == b'/').any(trailing) {
        return Cow::Borrowed(path);
    }
    let parts: Vec<Cow<'_, [u8]>> = path.split(|b| *b == b'/').map(fold_name).collect();
    if parts.iter().all(|p| matches!(p, Cow::Borrowed(_))) {
        return Cow::Borrowed(path);
    }
    Cow::Owned(parts.join(&b'/'))
}

/// Whether `name` ends with a dot or a space, which Windows drops, and holds something else
/// (`.`, `..` and `...` are left as they are).
fn trailing(name: &[u8]) -> bool {
    matches!(name.last(), Some(b'.' | b' ')) && name.iter().any(|b| !matches!(b, b'.' | b' '))
}

/// Whether a file system that does not tell names apart takes `a` and `b` for one name.
pub fn same_name(a: &[u8], b: &[u8]) -> bool {
    fold_name(a) == fold_name(b)
}

/// `c` folded onto `out`, as [`fold_name`] says: lowered, raised and lowered again, which is
/// full case folding as the standard library can do it (it takes `ſ`, the Kelvin sign, `ı`,
/// the ligatures and `ß` onto ASCII, `É` onto `é` and the final `ς` onto `σ`).
fn fold_char(c: char, out: &mut Vec<u8>) {
    if crate::text::drawn_as_nothing(c) {
        return;
    }
    let mut buf = [0; 4];
    for folded in c
        .to_lowercase()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
    {
        out.extend_from_slice(folded.encode_utf8(&mut buf).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_is_idempotent_and_keeps_what_it_cannot_read() {
        for name in [
            ".G\u{131}T",
            ".ba\u{17F}hrc",
            "\u{FB03}le",
            "STRA\u{DF}E",
            ".cla\u{200D}ude. .",
            "caf\u{E9}",
            "...",
            ".",
            "..",
            ". .",
            "a\u{E0041}b",
            "\u{212A}ey",
            "\u{130}stanbul",
            "\u{3A3}\u{3BF}\u{3C2}",
            "\u{149}",
        ] {
            let once = fold_name(name.as_bytes()).into_owned();
            assert_eq!(&*fold_name(&once), &once[..], "{name}");
        }
        assert_eq!(&*fold_name("STRA\u{DF}E".as_bytes()), b"strasse");
        // Letters beyond ASCII: folded as a case table takes them, composed as they come.
        assert_eq!(&*fold_name("CAF\u{C9}".as_bytes()), "caf\u{E9}".as_bytes());
        assert_eq!(
            &*fold_name("\u{3A3}\u{3BF}\u{3C2}".as_bytes()),
            "\u{3C3}\u{3BF}\u{3C3}".as_bytes()
        );
        assert_eq!(
            &*fold_name("\u{41F}\u{410}".as_bytes()),
            "\u{43F}\u{430}".as_bytes()
        );
        assert_eq!(
            &*fold_name("cafe\u{301}".as_bytes()),
            "cafe\u{301}".as_bytes()
        );
        assert_eq!(&*fold_name(b"..."), b"...");
        assert_eq!(&*fold_name(b". ."), b". .");
        assert_eq!(&*fold_name(b"A\xff."), b"a\xff");
        assert_eq!(&*fold_path(b"/A./b /c"), b"/a/b/c");
        assert_eq!(&*fold_path(b"/a/./b/../c"), b"/a/./b/../c");
        // Folding never makes an empty name, a `.` or a `..`.
        for name in ["\u{6DD}", ".\u{200B}.", "\u{200B}.", "\u{FEFF}"] {
            assert_eq!(&*fold_name(name.as_bytes()), name.as_bytes(), "{name}");
        }
        assert!(matches!(fold_path(b"/srv/ws/notes.md"), Cow::Borrowed(_)));
        assert!(same_name(".MCP.json.".as_bytes(), b".mcp.json"));
        assert!(!same_name(b".mcp.jso", b".mcp.json"));
    }
}

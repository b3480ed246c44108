//! Whether a string is a URL of a given scheme, read the way the programs that receive it read
//! URLs: the argument gate asks it of `file:` (docs/policy.md, "The argument gate"), the MCP
//! guard of `http:` and `https:` (docs/guard.md, "Argument checks"). One reading for both, so
//! the two checks cannot drift apart.

/// Whether a URL parser takes `text` as a URL with `scheme` (ASCII, without its colon:
/// `"file"`, `"https"`).
///
/// The WHATWG URL parser (Node's `URL`, the `url` crate) and Python's `urlsplit` skip leading
/// C0 control characters and spaces, remove every tab, line feed and carriage return wherever
/// they are, and read the scheme in any case: to them `" fi\tLE:/etc/passwd"` is
/// `file:///etc/passwd`, and so it is here. The slashes after the colon do not matter
/// (`file:/p`, `file:p`, `http:host` and `http:\\host` are URLs too).
///
/// Text in which the scheme is only a word followed by white space (`file: fix a typo`,
/// `http: the protocol`) is not taken as a URL; parsed, it would name a place whose first name
/// begins with a space. The scheme and its colon alone (`file:`, with nothing after them but
/// what a parser drops) are: a parser reads that as the root, so the checks refuse it rather
/// than let it by.
///
/// ```
/// use capability_core::matching::scheme::reads_as_url;
/// assert!(reads_as_url("file:///etc/passwd", "file"));
/// assert!(reads_as_url(" fi\tLE:/etc/passwd", "file"));
/// assert!(reads_as_url("\u{1}HTTPS:\\\\example.com", "https"));
/// assert!(!reads_as_url("file: fix a typo", "file"));
/// assert!(!reads_as_url("profile:/etc", "file"));
/// ```
#[inline]
pub fn reads_as_url(text: &str, scheme: &str) -> bool {
    // Most text an argument holds starts with a character that is neither dropped nor the
    // scheme's first: decided here, in the caller's code (the argument gate runs this on every
    // string of every call).
    match (text.as_bytes().first(), scheme.as_bytes().first()) {
        (Some(b), Some(s)) if *b > b' ' && !b.eq_ignore_ascii_case(s) => false,
        _ => read_scheme(text, scheme),
    }
}

/// The local path a `file:` URL names, in any form [`reads_as_url`] takes as one, as the
/// argument gate reads it: `Some(Ok(path))`; `Some(Err(()))` for a file URL that names no local
/// path (a host, or nothing a path can be made of), which the checks refuse; `None` for text
/// that is not a file URL.
///
/// ```
/// use capability_core::matching::scheme::file_url_path;
/// use std::path::PathBuf;
/// assert_eq!(file_url_path("fi\tle:/etc/passwd"), Some(Ok(PathBuf::from("/etc/passwd"))));
/// assert_eq!(file_url_path("file://host/etc/passwd"), Some(Err(())));
/// assert_eq!(file_url_path("notes.md"), None);
/// ```
pub fn file_url_path(text: &str) -> Option<Result<std::path::PathBuf, ()>> {
    reads_as_url(text, "file").then(|| {
        url::Url::parse(text)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .ok_or(())
    })
}

/// [`reads_as_url`], whole.
#[inline(never)]
fn read_scheme(text: &str, scheme: &str) -> bool {
    // Byte by byte: every character skipped or compared is ASCII, so each step lands on a
    // character's boundary; most text fails at its first character, as cheaply as a compare.
    let bytes = text.as_bytes();
    let Some(mut at) = bytes.iter().position(|&b| b > b' ') else {
        return false;
    };
    let skip = |at: &mut usize| {
        while matches!(bytes.get(*at), Some(b'\t' | b'\n' | b'\r')) {
            *at += 1;
        }
    };
    for expected in scheme.bytes().chain(std::iter::once(b':')) {
        skip(&mut at);
        match bytes.get(at) {
            Some(b) if b.eq_ignore_ascii_case(&expected) => at += 1,
            _ => return false,
        }
    }
    skip(&mut at);
    // What a parser drops at the end does not make the scheme a word: `file: ` is the root.
    let rest = text[at..].trim_end_matches(|c: char| c <= ' ');
    rest.chars().next().is_none_or(|c| !c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_parsers_read_as_urls_are_urls() {
        for (text, scheme) in [
            ("file:///etc/passwd", "file"),
            ("file:/etc/passwd", "file"),
            ("file:etc/passwd", "file"),
            ("FILE:\\\\etc\\passwd", "file"),
            ("fi\tle:///etc/passwd", "file"),
            ("f\ni\rle:/etc/passwd", "file"),
            ("file\t:/etc/passwd", "file"),
            ("file:\n/etc/passwd", "file"),
            (" \u{1}\u{1f}file:/etc/passwd", "file"),
            ("file:", "file"),
            ("file: \t", "file"),
            ("http:evil.example", "http"),
            ("h\rttps://evil.example", "https"),
            ("\u{0}https://evil.example", "https"),
        ] {
            assert!(reads_as_url(text, scheme), "{text:?} as {scheme}");
        }
    }

    #[test]
    fn words_and_other_schemes_are_not() {
        for (text, scheme) in [
            ("file: fix a typo", "file"),
            ("file:\t fix a typo", "file"),
            ("file", "file"),
            ("fil:/etc", "file"),
            ("profile:/etc", "file"),
            ("files:/etc", "file"),
            ("\u{a0}file:/etc", "file"),
            ("http: the protocol", "http"),
            ("https:/x", "http"),
            ("a http://x", "http"),
            ("", "http"),
        ] {
            assert!(!reads_as_url(text, scheme), "{text:?} as {scheme}");
        }
    }

    /// No string the `url` crate (the WHATWG parser) reads as a URL of the scheme, naming a
    /// place that does not begin with a space, is missed: every joining of the pieces below,
    /// up to five of them.
    // guarantee: G-REG-13, G-MCP-07
    #[test]
    fn nothing_the_whatwg_parser_reads_as_the_scheme_is_missed() {
        let pieces = [
            "\t", "\n", " ", "\u{1}", "f", "F", "i", "le", "h", "ttp", "s", ":", "/", "\\", "x",
        ];
        for text in super::super::every_joining(&pieces, 5) {
            let Ok(url) = ::url::Url::parse(&text) else {
                continue;
            };
            let scheme = url.scheme();
            if !matches!(scheme, "file" | "http" | "https") {
                continue;
            }
            let named = if scheme == "file" {
                url.path().to_owned()
            } else {
                url.host_str().unwrap_or_default().to_owned()
            };
            if named.starts_with("/%20") || named.starts_with("%20") {
                continue;
            }
            assert!(reads_as_url(&text, scheme), "{text:?} parses as {url}");
        }
    }
}

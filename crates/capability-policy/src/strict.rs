//! What every policy and declaration text must pass before it is parsed at all: a size limit, a
//! nesting limit, and no key twice in one object or mapping (a parser would let the last one
//! win, so `forbidden: true` followed by the same tool again would drop the constraint). See
//! docs/policy.md, "Strict parsing".

use std::collections::HashMap;

use crate::PolicyFormat;

/// The largest policy or declaration text accepted, in bytes.
pub const MAX_POLICY_BYTES: usize = 1 << 20;

/// The deepest nesting of objects, arrays, tables or mappings accepted.
pub const MAX_POLICY_DEPTH: usize = 64;

/// Checks `text` for `format` before any parser sees it: at most [`MAX_POLICY_BYTES`], nested
/// at most [`MAX_POLICY_DEPTH`] deep, and (JSON) no key twice in one object. The error is one
/// line naming what and where. Policy and narrowing parsing run it themselves; a caller parsing
/// declarations from text (a manifest) runs it first.
///
/// ```
/// use capability_policy::{PolicyFormat, check_policy_text};
/// let err = check_policy_text("{\"a\": 1,\n \"a\": 2}", PolicyFormat::Json).unwrap_err();
/// assert_eq!(err, "duplicate key \"a\" at lines 1 and 2");
/// ```
pub fn check_policy_text(text: &str, format: PolicyFormat) -> Result<(), String> {
    check_text_within(text, format, MAX_POLICY_BYTES)
}

/// [`check_policy_text`] with `max_bytes` in place of [`MAX_POLICY_BYTES`], for a text held to
/// the same nesting and duplicate-key rules that may be larger than a policy: a permission
/// manifest repeats a personality's hosts and roots in the access of each tool that has them.
///
/// ```
/// use capability_policy::{PolicyFormat, check_text_within};
/// let err = check_text_within("[1, 2]", PolicyFormat::Json, 4).unwrap_err();
/// assert_eq!(err, "the text is 6 bytes; at most 4 are accepted");
/// ```
pub fn check_text_within(text: &str, format: PolicyFormat, max_bytes: usize) -> Result<(), String> {
    if text.len() > max_bytes {
        return Err(format!(
            "the text is {} bytes; at most {max_bytes} are accepted",
            text.len()
        ));
    }
    match format {
        PolicyFormat::Json => check_json(text, MAX_POLICY_DEPTH),
        // TOML refuses duplicate keys itself and bounds its recursion.
        PolicyFormat::Toml => Ok(()),
        PolicyFormat::Yaml => yaml_flow_depth(text).and_then(|()| yaml_expansion(text)),
    }
}

fn too_deep(line: usize) -> String {
    format!("line {line}: nested more than {MAX_POLICY_DEPTH} levels deep")
}

/// One open JSON container: an object's keys (with the line each was first seen on), or an array.
enum Frame {
    Object {
        keys: HashMap<String, usize>,
        expect_key: bool,
    },
    Array,
}

/// A key given twice in one object of the JSON `text` (a parser keeps only the last, so what
/// the text looks like and what it says differ), as an error naming the key and its lines.
/// Nesting and size are not bounded here: for a call's arguments, which the registry bounds.
///
/// ```
/// use capability_policy::json_duplicate_key;
/// assert_eq!(
///     json_duplicate_key(r#"{"path": "a", "p\u0061th": "b"}"#).unwrap_err(),
///     "duplicate key \"path\" at lines 1 and 1"
/// );
/// assert!(json_duplicate_key(r#"{"a": {"a": 1}}"#).is_ok());
/// ```
pub fn json_duplicate_key(text: &str) -> Result<(), String> {
    check_json(text, usize::MAX)
}

/// Duplicate keys and nesting past `max_depth` in JSON. Syntax errors are left to the parser
/// that follows (this scanner only has to be right about valid JSON).
fn check_json(text: &str, max_depth: usize) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line += 1,
            b'{' | b'[' => {
                if stack.len() >= max_depth {
                    return Err(too_deep(line));
                }
                stack.push(if bytes[i] == b'{' {
                    Frame::Object {
                        keys: HashMap::new(),
                        expect_key: true,
                    }
                } else {
                    Frame::Array
                });
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(Frame::Object { expect_key, .. }) = stack.last_mut() {
                    *expect_key = true;
                }
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if let Some(Frame::Object { keys, expect_key }) = stack.last_mut()
                    && *expect_key
                {
                    *expect_key = false;
                    let raw = text.get(start..=i.min(bytes.len() - 1)).unwrap_or("");
                    // The key as the parser will see it (escapes decoded: "a" and "\u0061" are
                    // one key).
                    let key: String = serde_json::from_str(raw).unwrap_or_else(|_| raw.to_owned());
                    if let Some(first) = keys.get(&key) {
                        return Err(format!("duplicate key {key:?} at lines {first} and {line}"));
                    }
                    keys.insert(key, line);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// What a YAML text stands for once its aliases are expanded, held to [`MAX_POLICY_BYTES`] as
/// its text is: an anchor names a node once and every alias of it repeats the whole node, so a
/// text well under the limit can stand for gigabytes (one long string repeated by alias, or
/// lists of aliases of lists), which every parse would build. Counted without building anything,
/// the way a parse replays the aliases: each scalar's bytes and one for every node, which for a
/// text without aliases is no more than the text. The walk accepts every node the parser can
/// show (integers past 64 bits and tagged nodes among them): a node it stopped at that a parse
/// goes past would let the parse expand what lies beyond unwatched. Any other problem of the
/// text (its syntax, the parser's recursion limit) is left to the parse that follows, which
/// meets it at the same place, having expanded no more than this walk did.
#[cfg(feature = "yaml")]
fn yaml_expansion(text: &str) -> Result<(), String> {
    use serde::de::{DeserializeSeed, Deserializer, EnumAccess, Error, VariantAccess, Visitor};

    /// Spends the count on every node it is shown, and fails once past the limit.
    struct Budget<'a>(&'a mut usize);

    impl Budget<'_> {
        fn spend<E: Error>(&mut self, n: usize) -> Result<(), E> {
            *self.0 = self.0.saturating_add(n);
            if *self.0 > MAX_POLICY_BYTES {
                return Err(E::custom("past the limit"));
            }
            Ok(())
        }
        fn again(&mut self) -> Budget<'_> {
            Budget(&mut *self.0)
        }
    }

    impl<'de> DeserializeSeed<'de> for Budget<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
            de.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Budget<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any YAML node")
        }
        fn visit_bool<E: Error>(mut self, _: bool) -> Result<(), E> {
            self.spend(1)
        }
        fn visit_i64<E: Error>(mut self, _: i64) -> Result<(), E> {
            self.spend(1)
        }
        fn visit_u64<E: Error>(mut self, _: u64) -> Result<(), E> {
            self.spend(1)
        }
        fn visit_i128<E: Error>(mut self, _: i128) -> Result<(), E> {
            self.spend(1)
        }
        fn visit_u128<E: Error>(mut self, _: u128) -> Result<(), E> {
            self.spend(1)
        }
        fn visit_f64<E: Error>(mut self, _: f64) -> Result<(), E> {
            self.spend(1)
        }
        fn visit_str<E: Error>(mut self, s: &str) -> Result<(), E> {
            self.spend(s.len().saturating_add(1))
        }
        fn visit_bytes<E: Error>(mut self, b: &[u8]) -> Result<(), E> {
            self.spend(b.len().saturating_add(1))
        }
        fn visit_unit<E: Error>(mut self) -> Result<(), E> {
            self.spend(1)
        }
        fn visit_none<E: Error>(mut self) -> Result<(), E> {
            self.spend(1)
        }
        fn visit_some<D: Deserializer<'de>>(mut self, de: D) -> Result<(), D::Error> {
            self.spend(1)?;
            de.deserialize_any(self)
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(mut self, de: D) -> Result<(), D::Error> {
            self.spend(1)?;
            de.deserialize_any(self)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
            self.spend(1)?;
            while seq.next_element_seed(self.again())?.is_some() {}
            Ok(())
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
            self.spend(1)?;
            while map.next_key_seed(self.again())?.is_some() {
                map.next_value_seed(self.again())?;
            }
            Ok(())
        }
        // A tagged node (`!tag value`).
        fn visit_enum<A: EnumAccess<'de>>(mut self, data: A) -> Result<(), A::Error> {
            self.spend(1)?;
            let ((), variant) = data.variant_seed(self.again())?;
            variant.newtype_variant_seed(self)
        }
    }

    let mut spent = 0usize;
    let Err(e) = Budget(&mut spent).deserialize(serde_norway::Deserializer::from_str(text)) else {
        return Ok(());
    };
    if spent > MAX_POLICY_BYTES {
        return Err(format!(
            "its anchors and aliases expand the document past {MAX_POLICY_BYTES} bytes, the limit \
             of its text"
        ));
    }
    // The parser's own bound: at most a hundred alias repetitions for every event of the text.
    if e.to_string().starts_with("repetition limit exceeded") {
        return Err(
            "its anchors and aliases expand the document by more repetitions than the YAML \
             parser follows"
                .to_owned(),
        );
    }
    Ok(())
}

#[cfg(not(feature = "yaml"))]
fn yaml_expansion(_: &str) -> Result<(), String> {
    Ok(())
}

/// The flow nesting (`[` and `{` outside quotes and comments) of YAML, which the parser takes
/// time superlinear in; block nesting is bounded by the parser's own recursion limit, and
/// duplicate keys by [`yaml_duplicate`].
fn yaml_flow_depth(text: &str) -> Result<(), String> {
    let mut depth = 0usize;
    for (n, line) in text.lines().enumerate() {
        let mut quote: Option<u8> = None;
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match quote {
                Some(q) => {
                    if b == b'\\' && q == b'"' {
                        i += 1;
                    } else if b == q {
                        quote = None;
                    }
                }
                None => match b {
                    b'"' | b'\'' => quote = Some(b),
                    b'#' if i == 0 || bytes[i - 1].is_ascii_whitespace() => break,
                    b'[' | b'{' => {
                        depth += 1;
                        if depth > MAX_POLICY_DEPTH {
                            return Err(too_deep(n + 1));
                        }
                    }
                    b']' | b'}' => depth = depth.saturating_sub(1),
                    _ => {}
                },
            }
            i += 1;
        }
    }
    Ok(())
}

/// After the YAML parser found a duplicate key (its message names the key and a line at or
/// before the mapping that holds it): the lines of the first two entries of that key at one
/// indentation from there on.
#[cfg_attr(not(feature = "yaml"), allow(dead_code))]
pub(crate) fn yaml_duplicate(text: &str, key: &str, from_line: usize) -> String {
    let indent_of = |l: &str| l.len() - l.trim_start_matches([' ', '-']).len();
    let opens = |l: &str| {
        let t = l.trim_start_matches([' ', '-']);
        [
            format!("{key}:"),
            format!("\"{key}\":"),
            format!("'{key}':"),
        ]
        .iter()
        .any(|p| t.starts_with(p.as_str()))
    };
    let mut seen: HashMap<usize, usize> = HashMap::new();
    for (i, line) in text.lines().enumerate().skip(from_line.saturating_sub(1)) {
        if opens(line) {
            let indent = indent_of(line);
            if let Some(first) = seen.get(&indent) {
                return format!("duplicate key {key:?} at lines {first} and {}", i + 1);
            }
            seen.insert(indent, i + 1);
        }
    }
    format!("duplicate key {key:?} in the mapping at line {from_line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policy reading of a JSON text: duplicate keys and nesting.
    fn policy_json(text: &str) -> Result<(), String> {
        check_json(text, MAX_POLICY_DEPTH)
    }

    // guarantee: G-POL-02
    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_aliases_are_held_to_the_limit_of_the_text() {
        // One long string, repeated by alias: 64 KiB of text standing for 6 MiB.
        let text = format!(
            "a: &s {}\nb: [{}]\n",
            "x".repeat(60_000),
            ["*s"; 100].join(", ")
        );
        let err = yaml_expansion(&text).unwrap_err();
        assert!(err.contains("past 1048576 bytes"), "{err}");
        // Within the limit, aliases and tags are walked and pass.
        assert_eq!(
            yaml_expansion("a: &r [\"/x\", !tagged \"/y\"]\nb: *r\nc: ~\nd: {e: 1.5, f: true}\n"),
            Ok(())
        );
        // A text without aliases counts no more than itself, even at the limit: short scalars,
        // empty values and nested empty nodes.
        let mut near = String::from("a: [");
        while near.len() < MAX_POLICY_BYTES - 100 {
            near.push_str("x,");
        }
        near.push_str("x]\n");
        assert_eq!(yaml_expansion(&near), Ok(()));
        let mut keys = String::new();
        for n in 0.. {
            let line = format!("k{n}:\nl{n}: [[], {{}}]\n");
            if keys.len() + line.len() > MAX_POLICY_BYTES {
                break;
            }
            keys.push_str(&line);
        }
        assert_eq!(yaml_expansion(&keys), Ok(()));
        // Something else wrong is left to the parse.
        assert_eq!(yaml_expansion("a: [\n"), Ok(()));
        // Whatever node comes first, the walk goes on to the aliases behind it: integers past
        // 64 bits, tagged nodes, odd scalars (a walk that stopped at the first of these left
        // the parse to build what followed).
        let bomb = format!("- &s {}\n{}", "x".repeat(60_000), "- *s\n".repeat(100));
        for first in [
            "100000000000000000000000000",
            "-100000000000000000000000000",
            "!tag 1",
            "!tag [1, 2]",
            "!tag {a: 1}",
            "!!binary aGVsbG8=",
            "!!str 1",
            ".inf",
            ".nan",
            "~",
            "0x1F",
            "0o17",
            "'q'",
            "\"\\u00e9\"",
            "|\n  block",
            "? complex\n  : key",
            "!tag",
            "!tag ~",
            "&t !tag x",
            "!!null ~",
            "!!bool true",
            "!!int 7",
            "!!float 1.5",
            "!!seq [1]",
            "!!map {a: 1}",
            "!!set {a}",
            "!!timestamp 2001-12-14",
            "!<tag:yaml.org,2002:str> x",
        ] {
            let text = format!("- {first}\n{bomb}");
            let err = yaml_expansion(&text).expect_err(first);
            assert!(err.contains("past 1048576 bytes"), "{first}: {err}");
        }
    }

    // guarantee: G-POL-02
    #[test]
    fn json_duplicates_are_found_at_any_depth_with_both_lines() {
        assert_eq!(
            policy_json("{\"a\": 1,\n \"b\": {\"x\": 1,\n \"x\": 2}}"),
            Err("duplicate key \"x\" at lines 2 and 3".to_owned())
        );
        assert!(
            policy_json("{\"a\": 1, \"\\u0061\": 2}").is_err(),
            "escapes decoded"
        );
        assert!(policy_json("{\"a\": {\"k\": 1}, \"b\": {\"k\": 1}}").is_ok());
        assert!(policy_json("[{\"k\": 1}, {\"k\": 2}]").is_ok());
        assert!(
            policy_json("{\"a\": \"k\", \"k\": \"a\"}").is_ok(),
            "values are not keys"
        );
        assert!(policy_json("{\"a\": \"}{\\\"\", \"b\": 1}").is_ok());
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = "[".repeat(MAX_POLICY_DEPTH + 1);
        assert!(policy_json(&deep).unwrap_err().contains("nested more than"));
        assert!(policy_json(&"[".repeat(MAX_POLICY_DEPTH)).is_ok());
        let yaml = format!("a: {}", "[".repeat(100_000));
        assert!(yaml_flow_depth(&yaml).is_err());
        assert!(yaml_flow_depth("a: \"[[[[[[[[\" # [[[[\nb: ['x', {c: d}]").is_ok());
        let big = "x".repeat(MAX_POLICY_BYTES + 1);
        assert!(
            check_policy_text(&big, PolicyFormat::Toml)
                .unwrap_err()
                .contains("bytes")
        );
    }

    #[test]
    fn yaml_duplicate_names_both_lines() {
        let text = "id: x\nconstraints:\n  run:\n    forbidden: true\n  run:\n    max: 1\n";
        assert_eq!(
            yaml_duplicate(text, "run", 3),
            "duplicate key \"run\" at lines 3 and 5"
        );
    }
}

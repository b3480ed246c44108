//! JSON written one way only: the JSON Canonicalization Scheme (RFC 8785), which is what
//! JavaScript's `JSON.stringify` writes with every object's members sorted. Ethos matches its
//! `denyRules` against such text (`escalate.calls`), and a guarded tool's pin is the digest of
//! it (docs/guard.md, "Pinning what the model is shown"), so that anyone can compute the same
//! text with any RFC 8785 library.

use serde_json::Value;

/// `value` in canonical JSON (RFC 8785): no spaces; object members sorted by their names'
/// UTF-16 code units, as JavaScript compares strings; strings escaped as `JSON.stringify`
/// escapes them (`"`, `\`, and control characters, the short forms where there are some,
/// `\u00xx` in small hex digits for the rest); every number as JavaScript holds it (a double)
/// and writes it (`1`, `0.1`, `1e+21`, `1.5e-7`).
///
/// ```
/// use serde_json::json;
/// let value = json!({"b": [1.0, 1e21, 0.5], "a": "x\u{1}y", "é": null, "z": true});
/// assert_eq!(
///     capability_core::canonical_json(&value),
///     r#"{"a":"x\u0001y","b":[1,1e+21,0.5],"z":true,"é":null}"#
/// );
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// [`canonical_json`], written into `out`. Its depth is bounded by the JSON parser that read the
/// value (serde_json refuses more than 128 levels), so the recursion is too.
pub(crate) fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            // By UTF-16 code units, as JavaScript's `<` compares strings.
            keys.sort_unstable_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        // Every number as JavaScript holds it (a double) and writes it.
        Value::Number(n) => out.push_str(&js_number(n.as_f64().unwrap_or(f64::NAN))),
        other => out.push_str(&other.to_string()),
    }
}

/// JavaScript's `Number::toString` (ECMA-262, 6.1.6.1.20): the shortest digits that read back
/// as the same double, in fixed notation from 1e-6 up to 1e21, in exponent notation with its
/// sign outside it; `null` for what JSON cannot hold, as `JSON.stringify` writes it.
fn js_number(x: f64) -> String {
    if !x.is_finite() {
        return "null".to_owned();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    if x < 0.0 {
        return format!("-{}", js_number(-x));
    }
    // Rust's shortest round-trip digits: `d.ddde±k`.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i64;
    let n = exp.parse::<i64>().unwrap_or(0) + 1;
    if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        format!("{int}.{frac}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let sign = if n - 1 < 0 { '-' } else { '+' };
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        format!("{first}{dot}{rest}e{sign}{}", (n - 1).abs())
    }
}

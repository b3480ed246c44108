//! The argument gate and the depth of a call's arguments, checked in one walk (docs/policy.md,
//! "The argument gate").

use capability_types::{CapabilityError, DenialCode};
use serde_json::Value;

use super::admission::Refusal;
use crate::resolve::ResolvedPaths;

/// The structural checks of a call's arguments, made in one walk: they nest at most
/// [`MAX_VALUE_DEPTH`](capability_types::MAX_VALUE_DEPTH) levels, and, when `gated`, they pass
/// the argument gate: every string (at any depth, an object's member names too) that is an
/// absolute path or a `file:` URL must lie within the tool's read or write reach, so a tool
/// that takes a path but does not use `ScopedFs` is gated all the same. A tool with no reach
/// may take no such argument.
///
/// Arguments both too deep and holding a path out of reach are refused for their depth, as if
/// the depth were checked first, whichever the walk meets first.
///
/// The members of the top-level object named in `data` ([`Tool::data_arguments`](capability_types::Tool::data_arguments)) are data:
/// their depth is checked, their strings are not read as paths.
pub(super) fn check_arguments(
    args: &Value,
    gated: bool,
    data: &[String],
    reach: Option<&ResolvedPaths>,
) -> Result<(), Refusal> {
    /// Keeps a nested container for later, with its depth and whether its strings are gated;
    /// gates a scalar at once.
    fn visit<'a>(
        child: &'a Value,
        depth: usize,
        gated: bool,
        stack: &mut Vec<(&'a Value, usize, bool)>,
        gate: &impl Fn(&Value) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        match child {
            Value::Array(_) | Value::Object(_) => {
                stack.push((child, depth + 1, gated));
                Ok(())
            }
            Value::String(_) if gated => gate(child),
            _ => Ok(()),
        }
    }
    let gate = |value: &Value| match value {
        Value::String(s) => gate_text(s, reach),
        _ => Ok(()),
    };
    // Only on a refusal: the whole depth, for the message and for its precedence.
    let too_deep = || {
        let depth = capability_types::value_depth(args);
        (depth > capability_types::MAX_VALUE_DEPTH).then(|| {
            Refusal::from(CapabilityError::invalid_input(format!(
                "arguments nest {depth} levels deep; at most {} are accepted",
                capability_types::MAX_VALUE_DEPTH
            )))
        })
    };
    // Strings are checked where they are found; only nested containers go on the stack, so
    // flat arguments allocate nothing.
    let mut stack: Vec<(&Value, usize, bool)> = Vec::new();
    let mut next = match args {
        Value::Array(_) | Value::Object(_) => Some((args, 1, gated)),
        scalar if gated => return gate(scalar),
        _ => return Ok(()),
    };
    while let Some((container, depth, gated)) = next {
        if depth > capability_types::MAX_VALUE_DEPTH {
            return Err(too_deep().unwrap_or_else(|| {
                Refusal::from(CapabilityError::invalid_input("arguments nest too deep"))
            }));
        }
        let checked = match container {
            Value::Array(items) => items
                .iter()
                .try_for_each(|v| visit(v, depth, gated, &mut stack, &gate)),
            // A member's name is gated with its value (a tool may take a map from paths to
            // what it writes there); only the top level's members can be data.
            Value::Object(map) if depth == 1 && !data.is_empty() => {
                map.iter().try_for_each(|(key, v)| {
                    let gated = gated && !data.iter().any(|d| d == key);
                    if gated {
                        gate_text(key, reach)?;
                    }
                    visit(v, depth, gated, &mut stack, &gate)
                })
            }
            Value::Object(map) => map.iter().try_for_each(|(key, v)| {
                if gated {
                    gate_text(key, reach)?;
                }
                visit(v, depth, gated, &mut stack, &gate)
            }),
            _ => Ok(()),
        };
        if let Err(refusal) = checked {
            return Err(too_deep().unwrap_or(refusal));
        }
        next = stack.pop();
    }
    Ok(())
}

/// [`gate_string`], with the question most strings answer at their first byte (neither a
/// path nor a URL) asked in the walk's own code, without a call.
#[inline(always)]
fn gate_text(s: &str, reach: Option<&ResolvedPaths>) -> Result<(), Refusal> {
    if s.starts_with('/') || crate::matching::scheme::reads_as_url(s, "file") {
        gate_string(s, reach)
    } else {
        Ok(())
    }
}

/// The argument gate for one string: an absolute path or a `file:` URL must lie within the
/// read or the write reach.
fn gate_string(s: &str, reach: Option<&ResolvedPaths>) -> Result<(), Refusal> {
    // `//etc/passwd` is `/etc/passwd` to the kernel.
    let path = if s.starts_with('/') {
        std::path::PathBuf::from(s)
    } else {
        // Every form a URL parser reads as a file URL (`file:/p`, `file:p`, backslashes for
        // slashes, tabs inside, control characters before), not only `file:///p`.
        // A file URL that does not name a local path is refused outright.
        match crate::matching::scheme::file_url_path(s) {
            Some(Ok(p)) => p,
            Some(Err(())) => {
                return Err(CapabilityError::denied(
                    DenialCode::PathNotReachable,
                    format!("{} is not a local file URL", s.escape_debug()),
                )
                .into());
            }
            None => return Ok(()),
        }
    };
    let empty;
    let reach = match reach {
        Some(reach) => reach,
        None => {
            empty = ResolvedPaths::default();
            &empty
        }
    };
    reach.reaches(&path).map_err(Refusal::from)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::policy::CompiledPolicy;
    use crate::resolve::Intersected;
    use capability_policy::PolicyFormat;
    use capability_types::{ErrorCode, FsPaths, ToolCapabilities};
    use serde_json::json;

    fn reach(toml: &str) -> Arc<ResolvedPaths> {
        let policy = CompiledPolicy::load(toml, PolicyFormat::Toml, None).unwrap();
        let caps = ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality);
        let resolved = Intersected::new("t", &caps, &policy).for_call("s", Path::new("/srv"));
        resolved.fs.unwrap()
    }

    // guarantee: G-REG-13
    #[test]
    fn the_gate_checks_absolute_paths_and_file_urls_at_any_depth() {
        let r = reach("id = \"g\"\n[fs_reach]\nread = [\"/srv/data\"]\n");
        assert!(
            check_arguments(
                &json!({"a": ["/srv/data/x", "relative", "//srv/data/y"]}),
                true,
                &[],
                Some(&r)
            )
            .is_ok()
        );
        let refused = |v| check_arguments(&v, true, &[], Some(&r)).unwrap_err();
        // A file URL in every form a URL parser reads as one (WHATWG: one slash, none, and
        // backslashes are slashes in a file URL).
        for url in [
            "file:/etc/passwd",
            "file:etc/passwd",
            "File:/etc/passwd",
            "file:\\\\etc\\passwd",
            "file:/srv/data/../../etc/passwd",
            "fi\tle:///etc/passwd",
            " \u{1}file:/etc/passwd",
            "file\n:/etc/passwd",
        ] {
            assert_eq!(
                refused(json!({"u": url})).denial,
                Some(DenialCode::PathNotReachable),
                "{url}"
            );
        }
        // Text that only starts with the word is not a URL.
        assert!(check_arguments(&json!({"m": "file: fix a typo"}), true, &[], Some(&r)).is_ok());
        // A path the kernel reads as `/etc/passwd`, however many slashes lead it.
        assert_eq!(
            refused(json!({"p": "//etc/passwd"})).denial,
            Some(DenialCode::PathNotReachable)
        );
        assert_eq!(
            refused(json!({"deep": [{"p": "/etc/passwd"}]})).denial,
            Some(DenialCode::PathNotReachable)
        );
        assert_eq!(
            refused(json!("FILE:///etc/passwd")).denial,
            Some(DenialCode::PathNotReachable)
        );
        let remote = refused(json!("file://server/share"));
        assert!(
            remote.message.contains("not a local file URL"),
            "{}",
            remote.message
        );
        assert!(
            check_arguments(&json!("/srv/data"), true, &[], None).is_err(),
            "no reach, no paths"
        );
        assert!(
            check_arguments(&json!({"p": ["/etc/passwd"]}), false, &[], Some(&r)).is_ok(),
            "a constraint turned the gate off"
        );
    }

    /// `depth` levels of arrays around `inner`.
    fn nested(depth: usize, inner: Value) -> Value {
        (0..depth).fold(inner, |v, _| json!([v]))
    }

    // guarantee: G-REG-07
    #[test]
    fn arguments_too_deep_are_refused_for_their_depth_before_the_gate() {
        let r = reach("id = \"g\"\n[fs_reach]\nread = [\"/srv/data\"]\n");
        let max = capability_types::MAX_VALUE_DEPTH;
        assert!(check_arguments(&nested(max, json!("/srv/data/x")), true, &[], Some(&r)).is_ok());
        for gated in [true, false] {
            let deep =
                check_arguments(&nested(max + 1, json!(1)), gated, &[], Some(&r)).unwrap_err();
            assert_eq!(deep.code, ErrorCode::InputInvalid);
            assert!(
                deep.message.contains(&format!("nest {} levels", max + 1)),
                "{}",
                deep.message
            );
        }
        // Out of reach near the top, too deep further down: the depth is named, the whole of it.
        let both = json!({"a": "/etc/passwd", "b": nested(max + 30, json!(0))});
        let refused = check_arguments(&both, true, &[], Some(&r)).unwrap_err();
        assert!(
            refused
                .message
                .contains(&format!("nest {} levels", max + 31)),
            "{}",
            refused.message
        );
        // Out of reach at the deepest level allowed: the gate's refusal.
        let gate =
            check_arguments(&nested(max, json!("/etc/passwd")), true, &[], Some(&r)).unwrap_err();
        assert_eq!(gate.denial, Some(DenialCode::PathNotReachable));
    }

    /// The two checks made separately, recursively: what the one walk must decide.
    fn separately(
        args: &Value,
        gated: bool,
        data: &[String],
        reach: Option<&ResolvedPaths>,
    ) -> Result<(), ErrorCode> {
        fn gate(v: &Value, reach: Option<&ResolvedPaths>) -> bool {
            match v {
                Value::String(s) => gate_string(s, reach).is_ok(),
                Value::Array(items) => items.iter().all(|v| gate(v, reach)),
                Value::Object(map) => map
                    .iter()
                    .all(|(key, v)| gate_string(key, reach).is_ok() && gate(v, reach)),
                _ => true,
            }
        }
        if crate::registry::output::nests_deeper_than(args, capability_types::MAX_VALUE_DEPTH) {
            return Err(ErrorCode::InputInvalid);
        }
        let gated_part = match args {
            // The top level's data members are not read as paths.
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(key, _)| !data.contains(key))
                    .map(|(key, v)| (key.clone(), v.clone()))
                    .collect(),
            ),
            other => other.clone(),
        };
        if gated && !gate(&gated_part, reach) {
            return Err(ErrorCode::Denied);
        }
        Ok(())
    }

    proptest::proptest! {
        // guarantee: G-REG-13
        #[test]
        fn one_walk_decides_what_the_two_checks_decide(
            shape in proptest::collection::vec((0usize..6, 0usize..130, 0usize..5), 0..12),
            gated in proptest::bool::ANY,
            data in proptest::collection::vec(0usize..6, 0..3),
        ) {
            // Member names, two of them places: one in reach, one out of it.
            let name = |k: usize| match k {
                4 => "/etc/passwd".to_owned(),
                5 => "/srv/data/ok".to_owned(),
                k => format!("k{k}"),
            };
            let data: Vec<String> = data.into_iter().map(name).collect();
            let r = reach("id = \"g\"\n[fs_reach]\nread = [\"/srv/data\"]\n");
            let leaves = [json!("/srv/data/ok"), json!("/etc/passwd"), json!("relative"), json!(7), json!("file:///srv/data/x")];
            // Objects and arrays of nested leaves, some past the depth limit.
            let mut args = serde_json::Map::new();
            for (i, (key, depth, leaf)) in shape.into_iter().enumerate() {
                let value = nested(depth, leaves[leaf].clone());
                let entry = args.entry(name(key)).or_insert_with(|| json!([]));
                if let Some(items) = entry.as_array_mut() {
                    items.push(value);
                } else {
                    args.insert(format!("x{i}"), value);
                }
            }
            let args = Value::Object(args);
            let walked = check_arguments(&args, gated, &data, Some(&r)).map_err(|refusal| refusal.code);
            proptest::prop_assert_eq!(walked, separately(&args, gated, &data, Some(&r)));
        }
    }
}

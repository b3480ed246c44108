//! The rules that take whole calls away (`[constraints.<tool>] reject_args`, `[escalate] tools`
//! and `calls`, `forbidden`) against the manifest's diff: whenever the runtime's admission lets
//! a call through under a new personality that it stopped under the old one, `toolcap diff`
//! of the two manifests reports a loosening (docs/review.md, "The diff: did anything widen?").
//! The oracle is the registry's own dry run of admission, not a model of the rules.

mod support;

use std::collections::BTreeSet;

use capability_core::{
    Admission, CompiledPolicy, DefaultToolRegistry, ExecutionContext, Narrowing, PolicyFormat,
    ToolCall,
};
use capability_types::ToolCapabilities;
use proptest::prelude::*;
use serde_json::json;

/// Values an argument takes, and the texts rules are written with.
const VALUES: [&str; 4] = ["x", "y", "z", "Done"];
const TOOLS: [&str; 2] = ["t", "u"];
const TEXTS: [&str; 4] = ["x", "\"a\":\"y", "t {", "Done\""];

/// One personality's whole-call rules, as written.
#[derive(Debug, Clone)]
struct Rules {
    reject: BTreeSet<&'static str>,
    forbidden: bool,
    ask_tools: BTreeSet<&'static str>,
    ask_texts: BTreeSet<&'static str>,
}

impl Rules {
    /// The rules as a personality, compiled.
    fn compiled(&self) -> CompiledPolicy {
        let toml = format!("id = \"p\"\n{}", self.sections());
        CompiledPolicy::load(&toml, PolicyFormat::Toml, None).unwrap()
    }

    /// A context under the rules as a personality.
    fn context(&self) -> ExecutionContext {
        ExecutionContext::new("s", std::sync::Arc::new(self.compiled()), "/tmp")
    }

    /// The rules' own sections, as a personality or a narrowing writes them.
    fn sections(&self) -> String {
        let list = |items: &BTreeSet<&str>| {
            let quoted: Vec<String> = items.iter().map(|i| toml_string(i)).collect();
            format!("[{}]", quoted.join(", "))
        };
        let mut text = String::from("[constraints.t]\n");
        if !self.reject.is_empty() {
            text.push_str(&format!("reject_args = {{ a = {} }}\n", list(&self.reject)));
        }
        if self.forbidden {
            text.push_str("forbidden = true\n");
        }
        text.push_str(&format!(
            "[escalate]\ntools = {}\ncalls = {}\n",
            list(&self.ask_tools),
            list(&self.ask_texts)
        ));
        text
    }
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn subset(items: &'static [&'static str]) -> impl Strategy<Value = BTreeSet<&'static str>> {
    prop::collection::btree_set(prop::sample::select(items), 0..=items.len())
}

fn rules() -> impl Strategy<Value = Rules> {
    (
        subset(&VALUES),
        any::<bool>(),
        subset(&TOOLS),
        subset(&TEXTS),
    )
        .prop_map(|(reject, forbidden, ask_tools, ask_texts)| Rules {
            reject,
            forbidden,
            ask_tools,
            ask_texts,
        })
}

fn registry() -> DefaultToolRegistry {
    support::echo_registry(&TOOLS)
}

/// Whether `call` would reach its tool under `ctx`, by the registry's own dry run.
fn runs(registry: &DefaultToolRegistry, call: &ToolCall, ctx: &ExecutionContext) -> bool {
    matches!(registry.admission(call, ctx), Admission::Admitted(_))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // guarantee: G-MAN-01
    #[test]
    fn every_call_a_loosened_rule_lets_through_is_reported(
        old in rules(),
        new in rules(),
        tool in prop::sample::select(&TOOLS[..]),
        value in prop::sample::select(&VALUES[..]),
    ) {
        let (old_ctx, new_ctx) = (old.context(), new.context());
        let registry = registry();
        let call = ToolCall::new("1", tool, json!({"a": value}));
        let caps = ToolCapabilities::none();
        let manifest = |p: &CompiledPolicy| {
            capability_core::build_manifest(TOOLS.iter().map(|t| (*t, &caps)), Some(p))
        };
        let (old_m, new_m) = (manifest(&old_ctx.policy), manifest(&new_ctx.policy));
        let codes: BTreeSet<&str> = capability_core::diff(&old_m, &new_m)
            .into_iter()
            .filter(|w| w.tool == tool)
            .map(|w| w.code.as_str())
            .collect();
        if runs(&registry, &call, &new_ctx) && !runs(&registry, &call, &old_ctx) {
            prop_assert!(
                codes.contains("constraints.loosened") || codes.contains("escalation.removed"),
                "{tool} {{\"a\": {value:?}}} runs now and did not: {old:?} -> {new:?}, diff said {codes:?}"
            );
        }
        prop_assert!(capability_core::diff(&new_m, &new_m).is_empty());
    }

    // guarantee: G-REG-14
    /// A narrowing's whole-call rules only add to the personality's: a call the narrowed
    /// context lets through, the personality lets through too.
    #[test]
    fn a_narrowing_s_whole_call_rules_only_take_calls_away(
        base in rules(),
        extra in rules(),
        tool in prop::sample::select(&TOOLS[..]),
        value in prop::sample::select(&VALUES[..]),
    ) {
        let narrowing = Narrowing::parse(&extra.sections(), PolicyFormat::Toml, None).unwrap();
        let ctx = base.context();
        let narrowed = ctx.narrowed(&narrowing).unwrap();
        let registry = registry();
        let call = ToolCall::new("1", tool, json!({"a": value}));
        if runs(&registry, &call, &narrowed) {
            prop_assert!(
                runs(&registry, &call, &ctx),
                "{base:?} narrowed by {extra:?} lets {tool} {value} through"
            );
            // Each side's rule alone takes what it takes under the narrowed context too.
            prop_assert!(
                runs(&registry, &call, &extra.context()),
                "{extra:?} refuses {tool} {value} alone but not as a narrowing"
            );
        }
    }
}

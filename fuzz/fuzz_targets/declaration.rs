//! Tool declarations (the Ethos JSON shape): parsing never panics, and a declaration that parses
//! resolves against a fixed personality to nothing wider than that personality.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use capability_core::{CompiledPolicy, resolve};
use capability_types::{ToolCapabilities};
use capability_types::backend::{FsAccess, PathPolicy};
use capability_core::{PolicyFormat};
use libfuzzer_sys::fuzz_target;

fn policy() -> &'static CompiledPolicy {
    static POLICY: OnceLock<CompiledPolicy> = OnceLock::new();
    POLICY.get_or_init(|| {
        CompiledPolicy::load(
            "id = \"fuzz\"\n[fs_reach]\nread = [\"/srv/data\"]\nwrite = [\"/srv/data/out\"]\n\
             [safety.network]\nallow = [\"api.example.com\", \"*.example.org\"]\n\
             [safety.process]\nallow = [\"git\"]\n",
            PolicyFormat::Toml,
            None,
        )
        .expect("the fixed personality loads")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(caps) = serde_json::from_slice::<ToolCapabilities>(data) else {
        return;
    };
    let resolved = resolve("fuzzed", &caps, policy(), "s", Path::new("/srv/data"));
    if let Some(fs) = resolved.fs {
        for root in fs.roots(FsAccess::Read) {
            assert!(root.starts_with("/srv/data"), "read root {root:?} is wider");
        }
        for root in fs.roots(FsAccess::Write) {
            assert!(
                root.starts_with("/srv/data/out"),
                "write root {root:?} is wider"
            );
        }
    }
    if let Some(process) = resolved.process {
        use capability_types::backend::{ProcessPolicy};
        for binary in process.allowed_binaries() {
            assert_eq!(binary, "git", "binary {binary:?} is wider");
        }
    }
});

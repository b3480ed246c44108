//! Ethos personality directories (`config.yaml`, `toolset.yaml`, `mcp.yaml`): loading never
//! panics or hangs, whatever the three texts hold; what loads is a checked personality whose
//! toolset names only tools and whole servers, and whose reach roots are absolute.
#![no_main]

use std::path::Path;

use capability_policy::{
    EthosFiles, EthosVars, PersonalityPolicy, is_mcp_server_entry, valid_tool_name,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The three files, separated by NUL bytes (absent when there are fewer parts).
    let mut parts = text.split('\0');
    let files = EthosFiles {
        config: parts.next(),
        toolset: parts.next(),
        mcp: parts.next(),
    };
    let vars = EthosVars {
        ethos_home: Path::new("/home/fuzz/.ethos"),
        cwd: Path::new("/work/project"),
    };
    let Ok(policy) = PersonalityPolicy::from_ethos("fuzzed", files, vars, Some(Path::new("/home/fuzz")))
    else {
        return;
    };
    for tool in policy.toolset.iter().flatten() {
        assert!(
            valid_tool_name(tool) || is_mcp_server_entry(tool),
            "toolset entry {tool:?} is neither a tool nor a whole server"
        );
    }
    for root in policy.fs_reach.read.iter().chain(&policy.fs_reach.write) {
        assert!(root.is_absolute(), "reach root {root:?} is not absolute");
    }
});

//! End-to-end tests across crates, wasmtime-style: one test binary, one module per area.
#![allow(
    clippy::disallowed_methods,
    reason = "tests read fixture files and example policies from disk"
)]

mod backends;
mod capsule;
mod capsule_worker;
mod egress;
mod explain_agrees;
mod plugin;
mod policy_files;
mod policy_rules;
mod support;

//! Cross-crate end-to-end and red-team tests for toolcap. The tests live in `e2e/`; this
//! library is empty and exists so the package has a target of its own.
#![deny(missing_docs)]

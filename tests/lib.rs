//! Cross-crate end-to-end and red-team tests for toolcap. The tests live in `e2e/`; this
//! library carries the README as its documentation so the README's example is compiled as a
//! doctest and cannot drift from the API.
#![deny(missing_docs)]
#![doc = include_str!("../README.md")]

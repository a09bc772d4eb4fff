//! Test-only fixture MCP servers for every transport and era.
//!
//! Never a dependency of release code: only `[dev-dependencies]` name this crate.

//! The checks between a parsed reply and the tool: whether a turn should call a tool at
//! all, and whether each call's values are the ones the person gave.
//!
//! Pure: imports no backend, tool or run; only `turn/` and the leaf modules.

pub mod conform;
pub mod decision;
pub mod grounding;
pub mod relevance;

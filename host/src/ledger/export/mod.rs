//! The files the ledger writes beside its store, for people and other
//! programs to read.
//!
//! It owns, one file each: `issues.jsonl` ([`issues`]), the fire log's table
//! and its export as segments and a signed head ([`segments`]), the segments
//! a scan closes written ahead while it runs ([`ahead`]), and the checkpoint
//! of the store's write-ahead log beside the exports ([`checkpoint`]), and
//! the chain continued from the exported log when the store is behind it
//! ([`continued`]). It never counts (that is [`super::count`]).

pub(crate) mod ahead;
pub(crate) mod checkpoint;
pub mod continued;
pub mod issues;
pub mod segments;

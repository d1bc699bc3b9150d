//! Sources over plain files and folders of the data dir.
//!
//! It owns which entries may be read at all ([`safe_fs`]: regular files, no
//! links, no blocking open, capped reads), the file-name pattern they share
//! ([`glob`]) and the sources over them: the bots file ([`bots`]), the event
//! log's NDJSON files ([`events`]), a folder's listing ([`directory`]), with
//! what a watcher saw land there ([`arrivals`]), and its files' digests
//! ([`digest`]). It never
//! writes, creates or locks anything in the data dir.

pub mod arrivals;
pub mod bots;
pub mod digest;
pub mod directory;
pub mod events;
pub mod glob;
pub mod safe_fs;

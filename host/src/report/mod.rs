//! The friction digest (the scanner spec's stage 3): what a period of the
//! fire log cost, in the formats an operator reads.
//!
//! It owns reading a period out of the ledger's read-only view page by page
//! (memory holds one page and one aggregate per issue, whatever the log's
//! length), the digest's rules ([`digest`]) and its formats ([`render`]).
//! It never writes anything and never reads the data dir: `report` on the
//! command line (`ops::report`), the long-running mode's daily digest and
//! the status page's trends all come through here.

pub mod digest;
pub mod render;

pub use digest::{Digest, IssueCost, IssueEvent, Period};
pub use render::Format;

use crate::ledger::{LedgerError, LedgerView};

/// Entries read from the view at a time.
const PAGE: u32 = 4096;

/// The digest of `period` over what `view` holds, its costliest cut to
/// `top` (0: all); `None` (no ledger yet) has a quiet digest.
pub fn digest_of(view: Option<&LedgerView>, period: Period, top: usize) -> Result<Digest, LedgerError> {
    let mut gatherer = digest::Gatherer::new(period);
    let Some(view) = view else { return Ok(gatherer.finish(&[], top)) };
    let issues = view.issues()?;
    let mut after = 0;
    loop {
        let page = view.fires_after(after, PAGE)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        page.iter().for_each(|e| gatherer.take(e));
    }
    Ok(gatherer.finish(&issues, top))
}

//! Which cursor each file of the event log continues, so reading resumes
//! where the last scan stopped whatever was renamed, copied or rotated.
//!
//! It owns the order of the claims: a file continues its own path's cursor
//! first; then a file no cursor claimed may adopt an unclaimed one (a rename
//! or a copy: the one that read the most); then a cursor still unclaimed is
//! looked for among the folder's files outside the glob (logrotate's
//! `th.ndjson.1`). It never reads a line and never writes anything.

use std::path::Path;

use super::fingerprint::{continues, fingerprint};
use super::{EventsCursor, FileCursor, Opened};

/// A file to read this scan, and the cursor it continues (`None`: read from
/// its start) with that cursor's name.
pub(super) struct Planned {
    pub opened: Opened,
    pub start: Option<FileCursor>,
    pub origin: Option<String>,
}

/// The files of `current` (the glob's, opened), each with the cursor of
/// `previous` it continues, then the files outside the glob that continue a
/// cursor nothing else claimed.
pub(super) fn plan(folder: &Path, current: Vec<Opened>, previous: &EventsCursor) -> Vec<Planned> {
    let mut planned: Vec<Planned> =
        current.into_iter().map(|opened| Planned { opened, start: None, origin: None }).collect();
    let claimed = claim_own(&mut planned, previous);
    let adopted = adopt_orphans(&mut planned, previous, &claimed);
    let listed: Vec<String> = planned.iter().map(|p| p.opened.name.clone()).collect();
    let orphans: Vec<(&String, &FileCursor)> = previous
        .files
        .iter()
        .filter(|(name, cur)| cur.offset > 0 && !claimed.contains(name) && !adopted.contains(name))
        .collect();
    for (from, cur, opened) in follow_out_of_glob(folder, &listed, &orphans) {
        planned.push(Planned { opened, start: Some(cur.clone()), origin: Some(from.clone()) });
    }
    planned
}

/// Files that continue their own path's cursor; the names claimed.
fn claim_own(planned: &mut [Planned], previous: &EventsCursor) -> Vec<String> {
    let mut claimed = Vec::new();
    for p in planned.iter_mut() {
        let c = &mut p.opened;
        if let (Some(fp), Some(cur)) = (&c.fp, previous.files.get(&c.name))
            && continues(&mut c.file, c.len, fp, cur)
        {
            p.start = Some(cur.clone());
            p.origin = Some(c.name.clone());
            claimed.push(c.name.clone());
        }
    }
    claimed
}

/// Files no cursor claimed take, of the unclaimed cursors they continue,
/// the one that read the most (a short common prefix, a header line, proves
/// little); the names adopted.
fn adopt_orphans(planned: &mut [Planned], previous: &EventsCursor, claimed: &[String]) -> Vec<String> {
    let mut adopted: Vec<String> = Vec::new();
    for p in planned.iter_mut() {
        let c = &mut p.opened;
        let Some(fp) = &c.fp else { continue };
        if p.start.is_some() {
            continue;
        }
        let orphan = previous
            .files
            .iter()
            .filter(|(name, cur)| {
                !claimed.contains(name)
                    && !adopted.contains(name)
                    && **name != c.name
                    && cur.offset > 0
                    && continues(&mut c.file, c.len, fp, cur)
            })
            .max_by_key(|(_, cur)| cur.offset);
        if let Some((name, cur)) = orphan {
            p.start = Some(cur.clone());
            p.origin = Some(name.clone());
            adopted.push(name.clone());
        }
    }
    adopted
}

/// For each of `orphans` (cursors no file of the glob continued), the
/// file of `folder` outside the glob (not in `listed`) that continues
/// it, if there is one: the same name first (a file already followed),
/// then any other (a rename, again). Entries that are not regular files,
/// or cannot be opened, are passed over without a word: they are not
/// the source's.
fn follow_out_of_glob<'c>(
    folder: &Path,
    listed: &[String],
    orphans: &[(&'c String, &'c FileCursor)],
) -> Vec<(&'c String, &'c FileCursor, Opened)> {
    if orphans.is_empty() {
        return Vec::new();
    }
    let mut others: Vec<Opened> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !listed.contains(n))
        .filter_map(|name| {
            let mut file = super::super::safe_fs::open_regular(&folder.join(&name)).ok()?;
            let len = file.metadata().ok()?.len();
            let fp = fingerprint(&mut file).ok()?;
            Some(Opened { name, file, len, fp })
        })
        .collect();
    others.sort_by(|a, b| a.name.cmp(&b.name));
    let mut followed = Vec::new();
    for &(from, cur) in orphans {
        let mut pick = |same: bool| {
            others.iter_mut().position(|o| {
                (o.name == *from) == same
                    && o.fp.as_ref().is_some_and(|fp| continues(&mut o.file, o.len, &fp.clone(), cur))
            })
        };
        if let Some(i) = pick(true).or_else(|| pick(false)) {
            followed.push((from, cur, others.swap_remove(i)));
            others.sort_by(|a, b| a.name.cmp(&b.name));
        }
    }
    followed
}

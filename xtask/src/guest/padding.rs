//! Padding a built fixture component past a store's counts: the hostile
//! fixtures `instance_hog` and `table_hog` ask for more core instances, or a
//! bigger table, than the sandbox grants (docs/sandbox.md), which Rust source
//! alone cannot express (a Rust guest has a fixed handful of core instances
//! and no way to grow its table).
//!
//! It owns one transformation: appending to a component a core module (empty,
//! or declaring one funcref table of N elements) and a core instance section
//! that instantiates it N times (or once). Sections may come in any order in
//! a component, and appended items take the next indices, so nothing already
//! there is renumbered. The fixture asks for it in its `Cargo.toml`:
//! `[package.metadata.fixture]` with `pad_instances = N` or
//! `pad_table_elements = N`. It never touches a shipped detector.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// What a fixture asks to be appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// N instances of an empty core module.
    Instances(u32),
    /// One instance of a core module declaring a table of N funcref elements.
    TableElements(u32),
}

/// The padding the fixture manifest at `manifest` asks for, if any.
pub fn requested(manifest: &Path) -> Result<Option<Padding>> {
    let text = std::fs::read_to_string(manifest).with_context(|| format!("cannot read {}", manifest.display()))?;
    let mut in_table = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_table = line == "[package.metadata.fixture]";
            continue;
        }
        let Some((key, value)) = line.split_once('=').filter(|_| in_table) else { continue };
        let n: u32 =
            value.trim().parse().with_context(|| format!("{}: `{line}` is not a number", manifest.display()))?;
        match key.trim() {
            "pad_instances" => return Ok(Some(Padding::Instances(n))),
            "pad_table_elements" => return Ok(Some(Padding::TableElements(n))),
            other => bail!("{}: unknown fixture key `{other}`", manifest.display()),
        }
    }
    Ok(None)
}

/// Writes `component` with `padding` appended to `dest` (a new file: the
/// built one is left as cargo made it, so a build that changes nothing
/// never pads twice).
pub fn pad(component: &Path, padding: Padding, dest: &Path) -> Result<PathBuf> {
    let bytes = std::fs::read(component).with_context(|| format!("cannot read {}", component.display()))?;
    let padded = padded(&bytes, padding).with_context(|| format!("cannot pad {}", component.display()))?;
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(dest, padded).with_context(|| format!("cannot write {}", dest.display()))?;
    Ok(dest.to_owned())
}

/// The component's bytes with the padding module and its instances appended.
pub fn padded(component: &[u8], padding: Padding) -> Result<Vec<u8>> {
    const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
    const MODULE_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
    if component.get(..8) != Some(&COMPONENT_HEADER[..]) {
        bail!("not a component (header {:02x?})", component.get(..8));
    }
    // Core modules defined at the top level: the new one takes the next index.
    let mut modules = 0u32;
    let mut at = 8;
    while at < component.len() {
        let id = component[at];
        let (size, body) = uleb(component, at + 1)?;
        if id == 1 {
            modules += 1;
        }
        at = body + size as usize;
    }
    let (module, count) = match padding {
        Padding::Instances(n) => (MODULE_HEADER.to_vec(), n),
        Padding::TableElements(n) => {
            // Table section: one table, funcref, limits with a minimum only.
            let mut table = leb(1);
            table.extend([0x70, 0x00]);
            table.extend(leb(n));
            let mut m = MODULE_HEADER.to_vec();
            m.push(4);
            m.extend(leb(table.len() as u32));
            m.extend(table);
            (m, 1)
        }
    };
    // Core instance section: `count` times (instantiate module `modules`, no arguments).
    let mut instances = leb(count);
    for _ in 0..count {
        instances.push(0x00);
        instances.extend(leb(modules));
        instances.push(0x00);
    }
    let mut out = component.to_vec();
    for (id, body) in [(1u8, module), (2u8, instances)] {
        out.push(id);
        out.extend(leb(body.len() as u32));
        out.extend(body);
    }
    Ok(out)
}

fn leb(mut n: u32) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// An unsigned LEB128 at `at`: its value and where what follows starts.
fn uleb(bytes: &[u8], mut at: usize) -> Result<(u32, usize)> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        let byte = *bytes.get(at).context("a section size runs past the end")?;
        at += 1;
        value |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((value, at));
        }
    }
    bail!("a section size is longer than 5 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb_round_trips_across_byte_boundaries() {
        for n in [0, 1, 127, 128, 16_383, 16_384, 200_000, u32::MAX] {
            assert_eq!(uleb(&leb(n), 0).unwrap(), (n, leb(n).len()), "{n}");
        }
    }

    #[test]
    fn the_padding_is_appended_after_every_existing_section() {
        // A component with one empty core module already: the padding
        // instantiates module 1, the one it appends.
        let mut c = vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00, 1, 8];
        c.extend([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]);
        let out = padded(&c, Padding::Instances(2)).unwrap();
        assert_eq!(&out[..c.len()], &c[..]);
        assert_eq!(&out[c.len()..], &[1, 8, 0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 2, 7, 2, 0, 1, 0, 0, 1, 0]);
        assert!(padded(b"\0asm\x01\0\0\0", Padding::Instances(1)).is_err(), "a core module is not a component");
    }
}

//! Fixture `prober`: tries to act on the world (connect, resolve a name,
//! open and create files, read the environment and arguments) and reads
//! what the sandbox virtualises (the wall clock, the monotonic clock,
//! randomness), and reports each result as one observation (signature: the
//! probe's name; title: `name=result`), so a test can prove the host gives
//! it nothing and that what it virtualises is what docs/sandbox.md says.
//!
//! The test hands it, as config values, a loopback `port` with a listener
//! behind it and a `file` the test can read: a "denied" is then a refusal,
//! never a missing network or file.

use sentinel_sdk::prelude::*;

struct Prober(Vec<(&'static str, String)>);

fn verdict(ok: bool) -> String {
    (if ok { "GOT" } else { "denied" }).to_owned()
}

/// Attempts to act: each is "GOT" when it worked, "denied" otherwise.
fn act(port: u16, file: &str) -> Vec<(&'static str, String)> {
    use std::net::{TcpStream, ToSocketAddrs, UdpSocket};
    vec![
        ("connect", verdict(TcpStream::connect(("127.0.0.1", port)).is_ok())),
        ("resolve", verdict(("localhost", port).to_socket_addrs().is_ok_and(|mut a| a.next().is_some()))),
        ("udp", verdict(UdpSocket::bind("127.0.0.1:0").is_ok())),
        ("read-file", verdict(std::fs::read(file).is_ok())),
        ("read-etc", verdict(std::fs::read("/etc/hostname").is_ok())),
        ("read-cwd", verdict(std::fs::read_dir(".").is_ok())),
        ("create", verdict(std::fs::write("sentinel-probe.txt", b"x").is_ok())),
        ("env", verdict(std::env::vars().next().is_some())),
        ("args", verdict(std::env::args().next().is_some())),
    ]
}

/// Reads what the sandbox virtualises: the wall clock in ms, the monotonic
/// clock's advance over a sleep and some work, and sixteen random bytes.
fn read_virtual() -> Vec<(&'static str, String)> {
    use std::hash::{BuildHasher, Hasher};
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(-1, |d| d.as_millis() as i64);
    let started = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut spin = 0u64;
    for i in 0..1_000_000u64 {
        spin = spin.wrapping_mul(31).wrapping_add(i);
    }
    let advanced = started.elapsed().as_nanos();
    // std's randomly keyed hasher draws its keys from wasi:random.
    let random: Vec<String> = (0..2)
        .map(|_| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(spin);
            format!("{:016x}", h.finish())
        })
        .collect();
    vec![("wall-ms", wall.to_string()), ("monotonic-ns", advanced.to_string()), ("random", random.join("-"))]
}

impl Detector for Prober {
    fn describe() -> Descriptor {
        Descriptor::new("prober", "0.0.1")
            .emits("probe")
            .subscribe("messages", "tool-failure")
            .config_int("port", 9, "a loopback port with a listener behind it")
            .config_text("file", "/etc/hostname", "a file the test can read")
    }
    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        let port = u16::try_from(ctx.integer("port")?).unwrap_or(9);
        let mut got = act(port, ctx.text("file")?);
        got.extend(read_virtual());
        Ok(Prober(got))
    }
    fn push(&mut self, _: &Batch, _: &mut Vec<Observation>) -> Result<(), DetectorError> {
        Ok(())
    }
    fn finish(&mut self, out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        for (what, result) in &self.0 {
            let title = format!("{what}={result}");
            out.push(Observation::new("probe", what, &title, 0, what, ("messages", "-")));
        }
        Ok(None)
    }
}

sentinel_sdk::export_detector!(Prober);

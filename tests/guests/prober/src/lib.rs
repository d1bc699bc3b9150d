//! Fixture `prober`: tries to act on the world (connect, resolve a name,
//! open and create files, read the environment and arguments, read the
//! clock) and reports what it got as one observation title, so a test can
//! prove the host gives it nothing.

use sentinel_sdk::prelude::*;

struct Prober(Vec<String>);

fn probe() -> Vec<String> {
    use std::net::{TcpStream, ToSocketAddrs, UdpSocket};
    let mut got = Vec::new();
    let mut note = |what: &str, ok: bool| got.push(format!("{what}={}", if ok { "GOT" } else { "denied" }));
    note("connect", TcpStream::connect("127.0.0.1:9").is_ok());
    note("resolve", ("example.com", 80).to_socket_addrs().is_ok_and(|mut a| a.next().is_some()));
    note("udp", UdpSocket::bind("0.0.0.0:0").is_ok());
    note("read-etc", std::fs::read("/etc/hostname").is_ok());
    note("read-cwd", std::fs::read_dir(".").is_ok());
    note("create", std::fs::write("sentinel-probe.txt", b"x").is_ok());
    note("env", std::env::vars().next().is_some());
    note("args", std::env::args().next().is_some());
    got
}

impl Detector for Prober {
    fn describe() -> Descriptor {
        Descriptor::new("prober", "0.0.1").emits("probe").subscribe("messages", "tool-failure")
    }
    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Prober(probe()))
    }
    fn push(&mut self, _: &Batch, _: &mut Vec<Observation>) -> Result<(), DetectorError> {
        Ok(())
    }
    fn finish(&mut self, out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        let title = self.0.join(" ");
        out.push(Observation::new("probe", "probe", &title, 0, "probe", ("messages", "-")));
        Ok(None)
    }
}

sentinel_sdk::export_detector!(Prober);

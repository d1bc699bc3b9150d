//! A loopback TCP proxy between the shipper and `nats-server` that loses
//! publish acks on purpose (fault case 3 of issue 36).
//!
//! It owns [`AckThief`]: every byte from the client goes to the server as
//! is; from the server it reads the NATS protocol frame by frame (`MSG`,
//! `HMSG` with their payloads, control lines) and forwards each, except the
//! JetStream publish acks the chosen [`Theft`] picks: those are swallowed,
//! or the connection is cut in their place (the server holds the publish,
//! the client never hears of it). It never changes a byte it forwards.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What happens to the first ack of a stream seq.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Theft {
    /// Swallowed: the connection stays up, the client waits in vain.
    Swallow,
    /// The connection is cut instead of forwarding it.
    Cut,
}

/// The proxy, listening on a loopback port of its own.
pub struct AckThief {
    pub port: u16,
    stolen: Arc<AtomicUsize>,
}

impl AckThief {
    /// Proxies to `127.0.0.1:upstream`; the first (non-duplicate) ack of
    /// each stream seq in `plan` meets its theft.
    pub fn start(upstream: u16, plan: Vec<(u64, Theft)>) -> AckThief {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stolen = Arc::new(AtomicUsize::new(0));
        let plan = Arc::new(Mutex::new(plan));
        let count = Arc::clone(&stolen);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || copy_then_close(c2, s2));
                let (plan, count) = (Arc::clone(&plan), Arc::clone(&count));
                std::thread::spawn(move || frames(server, client, &plan, &count));
            }
        });
        AckThief { port, stolen }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Acks swallowed or cut so far.
    pub fn stolen(&self) -> usize {
        self.stolen.load(Ordering::SeqCst)
    }
}

fn copy_then_close(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// Server → client, one frame at a time, applying the plan.
fn frames(server: TcpStream, mut client: TcpStream, plan: &Mutex<Vec<(u64, Theft)>>, stolen: &AtomicUsize) {
    let mut reader = BufReader::new(server.try_clone().unwrap());
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            break;
        }
        let mut frame = line.clone();
        if let Some(size) = payload_size(&line) {
            let mut payload = vec![0; size + 2];
            if reader.read_exact(&mut payload).is_err() {
                break;
            }
            frame.extend_from_slice(&payload);
            match theft_for(&payload[..size], plan) {
                Some(Theft::Swallow) => {
                    stolen.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                Some(Theft::Cut) => {
                    stolen.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                None => {}
            }
        }
        if client.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}

/// The payload size a `MSG subject sid [reply] size` or `HMSG subject sid
/// [reply] hdr total` line announces.
fn payload_size(line: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(line).ok()?.trim_end();
    let mut words = text.split(' ');
    match words.next()? {
        "MSG" | "HMSG" => text.rsplit(' ').next()?.parse().ok(),
        _ => None,
    }
}

/// The theft planned for this payload, if it is the first ack of a planned
/// stream seq (taken out of the plan: its retry's ack goes through).
fn theft_for(payload: &[u8], plan: &Mutex<Vec<(u64, Theft)>>) -> Option<Theft> {
    let ack: serde_json::Value = serde_json::from_slice(payload).ok()?;
    if ack["stream"] != "SENTINEL_FIRES" || ack["duplicate"] == true {
        return None;
    }
    let seq = ack["seq"].as_u64()?;
    let mut plan = plan.lock().unwrap();
    let at = plan.iter().position(|(s, _)| *s == seq)?;
    Some(plan.remove(at).1)
}

//! `sentinel-host wit`: the contract as the binary speaks it, printed and as
//! files a bindings generator and a registry tool take.

use crate::support::*;

#[test]
fn wit_prints_the_contract_and_writes_the_text_and_the_binary_package() {
    let printed = sentinel_host().arg("wit").output().unwrap();
    assert_eq!(printed.status.code(), Some(0), "{}", String::from_utf8_lossy(&printed.stderr));
    let repo_wit = std::fs::read_to_string(root().join("wit/detector.wit")).unwrap();
    assert_eq!(String::from_utf8_lossy(&printed.stdout), repo_wit, "the text the host's bindings come from");

    let s = Scratch::new();
    let out = s.path("wit");
    let written = sentinel_host().arg("wit").arg("--out").arg(&out).output().unwrap();
    assert_eq!(written.status.code(), Some(0), "{}", String::from_utf8_lossy(&written.stderr));
    let text = out.join("sentinel-detector-0.2.0/detector.wit");
    let wasm = out.join("sentinel-detector-0.2.0.wasm");
    let listed = String::from_utf8_lossy(&written.stdout).into_owned();
    assert!(listed.contains(&text.display().to_string()) && listed.contains(&wasm.display().to_string()), "{listed}");
    assert_eq!(std::fs::read_to_string(&text).unwrap(), repo_wit);
    // The released 0.1.0, frozen, is written beside it and printed on request.
    let frozen = std::fs::read_to_string(root().join("wit/since_v0.1.0/detector.wit")).unwrap();
    assert_eq!(std::fs::read_to_string(out.join("sentinel-detector-0.1.0/detector.wit")).unwrap(), frozen);
    let old = sentinel_host().args(["wit", "--version", "0.1.0"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&old.stdout), frozen);
    let unknown = sentinel_host().args(["wit", "--version", "0.9.0"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("does not speak sentinel:detector@0.9.0"));
    // A binary WIT package: a component (layer 1) with the package's types.
    let bytes = std::fs::read(&wasm).unwrap();
    assert_eq!(&bytes[..8], b"\0asm\x0d\0\x01\0", "a component's preamble");

    // A folder that cannot be made is an error that names it.
    let blocked = s.path("file");
    std::fs::write(&blocked, "").unwrap();
    let o = sentinel_host().arg("wit").arg("--out").arg(blocked.join("sub")).output().unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot write"), "{}", String::from_utf8_lossy(&o.stderr));
}

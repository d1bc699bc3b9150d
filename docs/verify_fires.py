#!/usr/bin/env python3
"""An independent check of a sentinel fire log, from docs/fire-log.md alone.

    python3 verify_fires.py OUT_DIR [PUBLIC_KEY_JSON]

Checks every fires-NNNNNN.ndjson segment in order, the SHA-256 chain over the
canonical encoding, that the head (fires.head.json) counts the entries and
names the last hash, and, when the `cryptography` package is installed, the
head's Ed25519 signature with the public key (the `cryptography` package).
Exit 0: verified; 1: a finding (printed); 2: usage; 3: the signature could
not be checked (no `cryptography` package): not verified. Standard library
only, apart from the signature.
"""
import hashlib
import json
import os
import re
import sys

ENTRY_DOMAIN = b"sentinel-fire-v1\0"
HEAD_DOMAIN = b"sentinel-fire-head-v1\0"
OPTIONAL = ["detectorVersion", "kind", "sig", "origin", "severity", "tool", "botId", "threadId", "turnId",
            "evidenceSource", "evidenceId"]


def field(value):
    if value is None:
        return (0xFFFFFFFF).to_bytes(4, "big")
    data = value.encode("utf-8")
    return len(data).to_bytes(4, "big") + data


def entry_hash(e, prev):
    h = hashlib.sha256(ENTRY_DOMAIN + prev)
    for v in [str(e["seq"]), e["type"], str(e["recordedAt"]), str(e["at"]), e["detector"]]:
        h.update(field(v))
    for name in OPTIONAL:
        h.update(field(e.get(name)))
    h.update(field("true" if e["probation"] else "false"))
    h.update(field(e.get("reason")))
    return h.digest()


def fail(where, problem):
    print(f"BROKEN: {where}: {problem}")
    sys.exit(1)


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        sys.exit(2)
    out = sys.argv[1]
    names = sorted(n for n in os.listdir(out) if re.fullmatch(r"fires-\d{6}\.ndjson", n))
    prev, seq = bytes(32), 0
    for expected, name in enumerate(names, start=1):
        if name != f"fires-{expected:06d}.ndjson":
            fail(f"fires-{expected:06d}.ndjson", "segment missing")
        with open(os.path.join(out, name), encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                seq += 1
                e = json.loads(line)
                if e["seq"] != seq:
                    fail(f"{name} line {n}", f"entry {e['seq']} where {seq} was due")
                if e["prev"] != prev.hex():
                    fail(f"{name} line {n}", "prev is not the previous hash")
                h = entry_hash(e, prev)
                if e["hash"] != h.hex():
                    fail(f"{name} line {n}", "hash does not match the content")
                prev = h
    with open(os.path.join(out, "fires.head.json"), encoding="utf-8") as f:
        head = json.load(f)
    if head["count"] != seq or head["hash"] != prev.hex():
        fail("fires.head.json", f"head counts {head['count']}, the log has {seq}, or its hash is not the last")
    key_file = sys.argv[2] if len(sys.argv) == 3 else os.path.join(out, "fires.pub.json")
    with open(key_file, encoding="utf-8") as f:
        key = json.load(f)
    public = bytes.fromhex(key["publicKey"])
    if key["kid"] != "sidecar-v1-" + hashlib.sha256(public).hexdigest()[:8] or head["publicKey"] != key["publicKey"]:
        fail("fires.head.json", "signed with another key than the published one")
    message = HEAD_DOMAIN + head["count"].to_bytes(8, "big") + bytes.fromhex(head["hash"]) + \
        head["signedAt"].to_bytes(8, "big", signed=True)
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        # A check that did not happen is not a pass.
        print(f"NOT VERIFIED: {seq} entries chained, head matches, but signature not checked: "
              "no `cryptography` package (pip install cryptography)")
        sys.exit(3)
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(bytes.fromhex(head["signature"]), message)
    except Exception:
        fail("fires.head.json", "the signature does not verify")
    print(f"ok: {seq} entries chained; head signed by {key['kid']}")


if __name__ == "__main__":
    main()

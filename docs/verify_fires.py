#!/usr/bin/env python3
"""An independent check of a sentinel fire log, from docs/fire-log.md alone.

    python3 verify_fires.py OUT_DIR [PUBLIC_KEY_JSON]

Checks every fires-NNNNNN.ndjson segment in order, the SHA-256 chain over the
canonical encoding, that the head (fires.head.json) counts the entries and
names the last hash, and, when the `cryptography` package is installed, the
head's Ed25519 signature with the public key (the `cryptography` package),
following the key through key-rotation entries signed by the key they replace
(a key-lost entry from the key in force is a finding). A line whose fields do
not fit its type is a finding.
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
ROTATION_DOMAIN = b"sentinel-key-rotation-v1\0"
KEY_TYPES = ("key-rotation", "key-lost")
OPTIONAL = ["detectorVersion", "kind", "sig", "origin", "severity", "tool", "botId", "threadId", "turnId",
            "evidenceSource", "evidenceId"]
# What each type adds to the fields every entry has: (required, optional).
ISSUE = {"kind", "sig"}
TYPE_FIELDS = {
    "occurrence": (ISSUE | {"origin", "severity", "evidenceSource", "evidenceId"}, {"tool", "botId", "threadId", "turnId"}),
    "quarantine": ({"reason"}, set()),
    "release": ({"reason"}, set()),
    "digest": ({"reason"}, set()),
    "diagnostic": ({"reason"}, ISSUE),
    "fix": (ISSUE, {"reason"}),
    "reopen": (ISSUE, set()),
    "regression": (ISSUE | {"reason"}, set()),
    "threshold": (ISSUE | {"reason"}, set()),
    "key-rotation": ({"reason", "key"}, set()),
    "key-lost": ({"reason", "key"}, set()),
}
TYPED = sorted(set(OPTIONAL[1:]) | {"reason", "key"})


def field(value):
    if value is None:
        return (0xFFFFFFFF).to_bytes(4, "big")
    data = value.encode("utf-8")
    return len(data).to_bytes(4, "big") + data


def check_fields(e):
    """A line whose fields do not fit its type is not an entry."""
    if e["type"] not in TYPE_FIELDS:
        raise ValueError(f"an unknown type `{e['type']}`")
    required, optional = TYPE_FIELDS[e["type"]]
    for name in TYPED:
        there = e.get(name) is not None
        if there and name not in required | optional:
            raise ValueError(f"an entry of type `{e['type']}` cannot have the field `{name}`")
        if not there and name in required:
            raise ValueError(f"an entry of type `{e['type']}` must have the field `{name}`")


def entry_hash(e, prev):
    check_fields(e)
    h = hashlib.sha256(ENTRY_DOMAIN + prev)
    for v in [str(e["seq"]), e["type"], str(e["recordedAt"]), str(e["at"]), e["detector"]]:
        h.update(field(v))
    for name in OPTIONAL:
        h.update(field(e.get(name)))
    h.update(field("true" if e["probation"] else "false"))
    h.update(field(e.get("reason")))
    if e["type"] in KEY_TYPES:
        key = e.get("key") or {}
        for name in ["previousKey", "publicKey", "signature"]:
            h.update(field(key.get(name)))
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
    prev, seq, changes = bytes(32), 0, []
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
                try:
                    h = entry_hash(e, prev)
                except ValueError as problem:
                    fail(f"{name} line {n}", str(problem))
                if e["hash"] != h.hex():
                    fail(f"{name} line {n}", "hash does not match the content")
                if e["type"] in KEY_TYPES:
                    changes.append((f"{name} line {n}", e, prev))
                prev = h
    with open(os.path.join(out, "fires.head.json"), encoding="utf-8") as f:
        head = json.load(f)
    if head["count"] != seq or head["hash"] != prev.hex():
        fail("fires.head.json", f"head counts {head['count']}, the log has {seq}, or its hash is not the last")
    key_file = sys.argv[2] if len(sys.argv) == 3 else os.path.join(out, "fires.pub.json")
    with open(key_file, encoding="utf-8") as f:
        key = json.load(f)
    public = bytes.fromhex(key["publicKey"])
    if key["kid"] != "sidecar-v1-" + hashlib.sha256(public).hexdigest()[:8]:
        fail(os.path.basename(key_file), "its kid is not this key's")
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        Ed25519PublicKey = None
    # The key in force: the kept key, handed over by each rotation it signed
    # (with only the folder's key, from what the first key entry replaces).
    trusted, lost = (public.hex() if len(sys.argv) == 3 else None), None
    for where, e, before in changes:
        k = e.get("key") or {}
        if trusted is not None and k.get("previousKey") != trusted:
            continue
        if e["type"] == "key-rotation" and Ed25519PublicKey is not None:
            m = ROTATION_DOMAIN + e["seq"].to_bytes(8, "big") + before + bytes.fromhex(k["publicKey"]) + \
                e["recordedAt"].to_bytes(8, "big", signed=True)
            try:
                Ed25519PublicKey.from_public_bytes(bytes.fromhex(k["previousKey"])).verify(
                    bytes.fromhex(k.get("signature") or ""), m)
            except Exception:
                fail(where, "the key-rotation entry is not signed by the key it replaces")
        elif e["type"] == "key-lost" and lost is None:
            lost = where
        trusted = k["publicKey"]
    in_force = trusted or public.hex()
    if head["publicKey"] != in_force or (len(sys.argv) == 2 and in_force != public.hex()):
        fail("fires.head.json", "signed with another key than the published one")
    public = bytes.fromhex(in_force)
    message = HEAD_DOMAIN + head["count"].to_bytes(8, "big") + bytes.fromhex(head["hash"]) + \
        head["signedAt"].to_bytes(8, "big", signed=True)
    if Ed25519PublicKey is None:
        # A check that did not happen is not a pass.
        print(f"NOT VERIFIED: {seq} entries chained, head matches, but signature not checked: "
              "no `cryptography` package (pip install cryptography)")
        sys.exit(3)
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(bytes.fromhex(head["signature"]), message)
    except Exception:
        fail("fires.head.json", "the signature does not verify")
    if lost is not None:
        fail(lost, "key-lost: the signing key was replaced without its signature")
    kid = "sidecar-v1-" + hashlib.sha256(public).hexdigest()[:8]
    print(f"ok: {seq} entries chained; head signed by {kid}")


if __name__ == "__main__":
    main()

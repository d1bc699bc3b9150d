"""An independent consumer of SENTINEL_FIRES (nats-py, not the shipper's client).

Usage: fleet_consumer.py NATS_URL SUBJECT OUT_DIR [PREFIX]

Reads every message of the stream on SUBJECT and checks it against the fire
log exported in OUT_DIR (fires-*.ndjson): exactly one message per fire, the
Nats-Msg-Id of each equal to its entry's hash and unique, each payload's
`prev` the previous payload's `hash` (64 zeros first), the payloads equal to
the local entries, and the last one the local head. With PREFIX, the
stream must hold exactly the log's first PREFIX entries (a shipper held
back: nothing dropped, nothing out of order). Prints `ok N` or the first
difference, exit 1.
"""
import asyncio
import glob
import json
import os
import sys

import nats


async def stream_entries(url, subject):
    nc = await nats.connect(url)
    js = nc.jetstream()
    info = await js.stream_info("SENTINEL_FIRES")
    got = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            m = await js.get_msg("SENTINEL_FIRES", seq)
        except nats.js.errors.NotFoundError:
            continue
        if m.subject == subject:
            got.append(((m.headers or {}).get("Nats-Msg-Id"), json.loads(m.data)))
    await nc.close()
    return got


def local_entries(out):
    entries = []
    for name in sorted(glob.glob(os.path.join(out, "fires-*.ndjson"))):
        with open(name) as f:
            entries.extend(json.loads(line) for line in f if line.strip())
    return entries


def main():
    url, subject, out = sys.argv[1:4]
    got = asyncio.run(stream_entries(url, subject))
    local = local_entries(out)
    if len(sys.argv) > 4:
        local = local[: int(sys.argv[4])]
    ids = [i for i, _ in got]
    if len(set(ids)) != len(ids):
        sys.exit(f"duplicate message ids on {subject}")
    if len(got) != len(local):
        sys.exit(f"{len(got)} messages on {subject}, {len(local)} fires in the log")
    prev = "0" * 64
    for (mid, entry), mine in zip(got, local):
        if mid != entry["hash"] or entry["prev"] != prev or entry != mine:
            sys.exit(f"message for seq {entry['seq']} does not chain or differs from the log")
        prev = entry["hash"]
    if local and prev != local[-1]["hash"]:
        sys.exit("the last message is not the local head")
    print(f"ok {len(got)}")


if __name__ == "__main__":
    main()

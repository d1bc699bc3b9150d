"""The independent oracle for the digest's end-to-end test (tests/e2e/report.rs).

Not a test: started by `the_digest_ranks_as_a_recomputation_from_the_fire_log_does`
as `python3 report_oracle.py OUT_DIR SINCE_MS UNTIL_MS`. It recomputes the digest from
the output folder's exported files alone (`fires-*.ndjson`, `issues.jsonl`), straight
from the rules docs/cli.md states for `report` (not from the host's code), and prints
{"costliest": [{"sig", "count", "wastedTurns", "perDay"}], "new": [sig],
"regressed": [sig], "fixed": [sig]}.
"""

import glob
import json
import os
import sys

DAY = 86_400_000


def main():
    out, since, until = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    entries = []
    for path in sorted(glob.glob(os.path.join(out, "fires-*.ndjson"))):
        with open(path) as f:
            entries += [json.loads(line) for line in f if line.strip()]
    days = list(range(since // DAY, (max(until - 1, since)) // DAY + 1))
    costs, regressed, fixed = {}, {}, {}
    for e in entries:
        sig, at = e.get("sig"), e["at"]
        if sig is None or not (since <= at < until):
            continue
        if e["type"] == "occurrence":
            c = costs.setdefault(sig, {"count": 0, "turns": set(), "days": {}})
            c["count"] += 1
            c["days"][at // DAY] = c["days"].get(at // DAY, 0) + 1
            if e.get("turnId") is not None:
                c["turns"].add(e["turnId"])
        elif e["type"] == "regression":
            regressed[sig] = max(regressed.get(sig, at), at)
        elif e["type"] == "fix":
            fixed[sig] = max(fixed.get(sig, at), at)
    ranked = sorted(costs.items(), key=lambda kv: (-len(kv[1]["turns"]), -kv[1]["count"], kv[0]))
    with open(os.path.join(out, "issues.jsonl")) as f:
        issues = [json.loads(line) for line in f if line.strip()]
    new = sorted((i["firstAt"], i["sig"]) for i in issues if since <= i["firstAt"] < until)
    print(json.dumps({
        "costliest": [
            {"sig": s, "count": c["count"], "wastedTurns": len(c["turns"]),
             "perDay": [c["days"].get(d, 0) for d in days]}
            for s, c in ranked
        ],
        "new": [s for _, s in new],
        "regressed": [s for s, _ in sorted(regressed.items(), key=lambda kv: (kv[1], kv[0]))],
        "fixed": [s for s, _ in sorted(fixed.items(), key=lambda kv: (kv[1], kv[0]))],
    }))


main()

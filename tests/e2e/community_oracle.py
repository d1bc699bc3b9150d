"""An independent oracle for `community totals` (docs/community.md).

Usage: community_oracle.py OUT_DIR...

Reads each output folder's issues.jsonl (nothing of sentinel's code) and
prints, as one JSON object, every signature's count summed across the
folders: what the bucket's totals must be when every occurrence lies in the
ledger's per-day history, since a week's records of one install sum to the
issue's count and the installs' records sum across installs.
"""
import json
import os
import sys


def main():
    totals = {}
    for out in sys.argv[1:]:
        with open(os.path.join(out, "issues.jsonl")) as f:
            for line in f:
                if line.strip():
                    issue = json.loads(line)
                    totals[issue["sig"]] = totals.get(issue["sig"], 0) + issue["count"]
    print(json.dumps(totals, sort_keys=True))


if __name__ == "__main__":
    main()

"""The independent oracle for the windowed sentinels' end-to-end test (tests/e2e/stock.rs).

Not a test: started by `windowed_sentinels_read_each_row_once_and_agree_with_a_recomputation`
as `python3 windowed_oracle.py DB PARAMS_JSON`. It recomputes, from the final tables
alone, what ledger-delta-watch and anomaly-watch must have fired at each scan, straight
from their rules as docs/stock-sentinels.md states them (not from their code): each row
carries `batch`, the index of the first scan that could see it. It prints
{"ledger": [window starts], "anomaly": [window starts]}: the windows that fired, each once.
"""

import json
import sqlite3
import sys


def ledger(rows, scans, p):
    w = p["window_ms"]
    fired = set()
    for k, t in enumerate(scans):
        seen = [(at, usd) for (b, at, usd) in rows if b <= k]
        if not seen:
            continue
        sums = {}
        for at, usd in seen:
            sums[at // w] = sums.get(at // w, 0.0) + usd
        cur = t // w
        start = max(cur - p["baseline_windows"], min(sums))
        if start >= cur:
            continue
        baseline = sum(sums.get(i, 0.0) for i in range(start, cur)) / (cur - start)
        now = sums.get(cur, 0.0)
        if baseline >= p["min_baseline_usd"] and now > baseline * (1 + p["threshold_pct"] / 100):
            fired.add(cur * w)
    return sorted(fired)


def anomaly(rows, scans, p):
    w = p["window_ms"]
    fired = set()
    for k, t in enumerate(scans):
        windows = {}
        for b, at, failed in rows:
            if b <= k:
                total, fails = windows.get(at // w, (0, 0))
                windows[at // w] = (total + 1, fails + int(failed))
        cur = t // w
        ewma = None
        for i in sorted(i for i in windows if i < cur):
            total, fails = windows[i]
            rate = fails / total
            ewma = rate if ewma is None else p["alpha"] * rate + (1 - p["alpha"]) * ewma
        total, fails = windows.get(cur, (0, 0))
        if ewma is None or total < max(p["min_events"], 1):
            continue
        if fails / total > ewma + p["max_drift"]:
            fired.add(cur * w)
    return sorted(fired)


def main(db, params):
    p = json.loads(params)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    spend = conn.execute("SELECT batch, at, usd FROM spend").fetchall()
    escalations = conn.execute("SELECT batch, at, failed FROM escalations").fetchall()
    print(json.dumps({
        "ledger": ledger(spend, p["scans"], p["ledger"]),
        "anomaly": anomaly(escalations, p["scans"], p["anomaly"]),
    }))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

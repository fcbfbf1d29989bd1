#!/usr/bin/env python3
"""The side-by-side table of benches/scripts/race_two_nodes.sh: l2Book exchange -> received (latency_stats) for the
server reading one node and the one racing two, the ratio of p99s, and hlbook's added latency both ways: node
write -> received per frame (latency_stats --audit) and node write -> first socket write per block of the diffs
line (the servers' /status `last_blocks`, deduplicated across polls).

    race_report.py OUT_DIR
"""

import json
import sys
from pathlib import Path

ADDED_STAGES = ["node_write_to_read", "read_to_applied", "applied_to_published", "published_to_first_write"]


def l2(out, name):
    doc = json.loads((out / f"{name}.json").read_text())
    c = next(c for c in doc["channels"] if c["channel"] == "l2Book")
    c["measured_from_ms"] = doc["start_unix_ms"] + 1000 * doc["warmup_s"]
    return c


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def server_added_ms(out, name, since_ms):
    """Per block of the diffs line applied after `since_ms` (the client's warmup): node write -> first socket
    write, ms."""
    seen = {}
    for line in (out / f"{name}-status.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        for b in json.loads(line).get("last_blocks", []):
            s = b["stages_ns"]
            if b["line"] != "diffs" or b["applied_ms"] < since_ms or any(s.get(k) is None for k in ADDED_STAGES):
                continue
            seen[b["height"]] = sum(s[k] for k in ADDED_STAGES) / 1e6
    return list(seen.values())


def main():
    out = Path(sys.argv[1])
    one, race = l2(out, "one"), l2(out, "race")
    rows = [("frames", "count"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p99.9", "p99_9"), ("max", "max")]
    print("\nl2Book exchange -> received (ms)")
    print(f"{'':28}{'one node (A)':>14}{'racing A+B':>14}")
    for label, key in rows:
        print(f"{label:28}{one[key]:>14}{race[key]:>14}")
    ratio = race["p99"] / one["p99"]
    print(f"p99 racing / one: {ratio:.3f} ({(1 - ratio) * 100:.1f}% lower; goal >= 25%: "
          f"{'met' if ratio <= 0.75 else 'not met'})")
    print("\nhlbook added, node write -> received per frame (latency_stats --audit, ms)")
    for label, key in rows:
        print(f"{label:28}{one['added'][key]:>14}{race['added'][key]:>14}")
    a = server_added_ms(out, "one", one["measured_from_ms"])
    b = server_added_ms(out, "race", race["measured_from_ms"])
    print("\nhlbook added, node write -> first socket write per diffs-line block (/status, ms)")
    print(f"{'blocks':28}{len(a):>14}{len(b):>14}")
    for label, q in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)]:
        print(f"{label:28}{pct(a, q):>14.3f}{pct(b, q):>14.3f}")
    for name, c in [("one", one), ("race", race)]:
        print(f"{name}: verdict {c['verdict']} {c['why']}".rstrip())
    src = out / "race-sources.json"
    if src.exists():
        for s in json.loads(src.read_text()).get("sources", []):
            print(f"race source {s['name']}: wins {s['wins']} lead_ms {s['lead_ms']} copies {s['copies']} "
                  f"disagreements {s['disagreements']}")


if __name__ == "__main__":
    main()

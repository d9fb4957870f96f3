#!/usr/bin/env python3
"""Reads an AIPerf per-record export (`aiperf profile … --export-level records` writes
`profile_export.jsonl` in the artifact directory) and prints its per-request errors against the
simulator's script, like `suite fidelity --url` and guidellm_table.py.

Per record AIPerf keeps (in display units, usually ms):
  time_to_first_token   first content chunk − request start (perf_counter)
  inter_chunk_latency   the list of gaps between consecutive content chunks — a per-gap ITL
  inter_token_latency   (request_latency − TTFT) / (output tokens − 1), i.e. our TPOT
  request_latency       last content chunk − request start
Only records of the profiling phase without an error are counted.

usage: aiperf_table.py PROFILE_EXPORT.jsonl TTFT_MS ITL_MS LABEL [VERSION]
"""

import json
import sys

from table import pct, row

TO_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}


def ms(metrics, tag):
    m = metrics.get(tag)
    if m is None:
        return None
    scale = TO_MS[m["unit"]]
    if isinstance(m["value"], list):
        return [x * scale for x in m["value"]]
    return m["value"] * scale


def main():
    path, ttft_ms, itl_ms, label = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    version = sys.argv[5] if len(sys.argv) > 5 else ""
    ok, errored, tokens = [], 0, set()
    for line in open(path):
        r = json.loads(line)
        if r["metadata"].get("benchmark_phase", "profiling") != "profiling":
            continue
        if r.get("error"):
            errored += 1
        else:
            ok.append(r["metrics"])
    ttft, gaps, tpot, e2e = [], [], [], []
    for m in ok:
        n = m.get("output_sequence_length") or m.get("output_token_count")
        n = n["value"] if n else None
        tokens.add(n)
        if (t := ms(m, "time_to_first_token")) is not None:
            ttft.append(t - ttft_ms)
        gaps += [g - itl_ms for g in ms(m, "inter_chunk_latency") or []]
        if (t := ms(m, "inter_token_latency")) is not None:
            tpot.append(t - itl_ms)
        if (t := ms(m, "request_latency")) is not None and n:
            e2e.append(t - (ttft_ms + itl_ms * (n - 1)))
    print(f"\n#### AIPerf {version} — {label}\n")
    print(f"{len(ok)} successful requests, {errored} errored; output tokens per request: "
          f"{', '.join(str(t) for t in sorted(tokens, key=str))}\n")
    print("| quantity | n | min ms | P50 ms | P99 ms | max ms |\n|---|---:|---:|---:|---:|---:|")
    print(row("TTFT − scripted", ttft))
    print(row("\\|TTFT − scripted\\|", [abs(x) for x in ttft]))
    print(row("each ITL gap (AIPerf `inter_chunk_latency`) − scripted", gaps))
    print(row("TPOT (AIPerf `inter_token_latency`) − scripted ITL", tpot))
    print(row("E2E (AIPerf `request_latency`) − scripted last token", e2e))
    p99 = pct(sorted(ttft), 99) if ttft else float("nan")
    print(f"\nSUMMARY tool=aiperf {label} p99_ttft_err_ms={p99:.3f}")


if __name__ == "__main__":
    main()

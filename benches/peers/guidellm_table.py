#!/usr/bin/env python3
"""Reads a GuideLLM JSON report (`guidellm run --output kind=json,path=…`) and prints its
per-request errors against the simulator's script, like `suite fidelity --url`.

GuideLLM keeps, per request, `time_to_first_token_ms` (first token iteration − request start)
and `inter_token_latency_ms` = (last token − first token) / (tokens − 1), i.e. our TPOT. It
keeps no per-chunk timestamps, so there is no per-gap ITL distribution to compare.

usage: guidellm_table.py REPORT.json TTFT_MS ITL_MS LABEL
"""

import json
import sys

from table import pct, row






def main():
    path, ttft_ms, itl_ms, label = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    d = json.load(open(path))
    for b in d["benchmarks"]:
        reqs = b["requests"]["successful"]
        ttft = [r["time_to_first_token_ms"] - ttft_ms for r in reqs]
        tpot = [r["inter_token_latency_ms"] - itl_ms for r in reqs if r.get("inter_token_latency_ms")]
        e2e = [
            r["request_latency"] * 1000 - (ttft_ms + itl_ms * (r["output_tokens"] - 1))
            for r in reqs
        ]
        errored = len(b["requests"].get("errored") or [])
        print(f"\n#### GuideLLM {d['metadata'].get('guidellm_version', '')} — {label}\n")
        print(f"{len(reqs)} successful requests, {errored} errored\n")
        print("| quantity | n | min ms | P50 ms | P99 ms | max ms |\n|---|---:|---:|---:|---:|---:|")
        print(row("TTFT − scripted", ttft))
        print(row("TPOT (GuideLLM `inter_token_latency_ms`) − scripted ITL", tpot))
        print("| each ITL gap − scripted | not recorded per gap by GuideLLM | | | | |")
        print(row("E2E − scripted last token", e2e))
        print(f"\nSUMMARY tool=guidellm {label} p99_ttft_err_ms={pct(sorted(ttft), 99):.3f}")


if __name__ == "__main__":
    main()

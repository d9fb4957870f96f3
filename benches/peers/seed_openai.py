#!/usr/bin/env python3
"""The seed article's method, as a peer in the side-by-side (BENCHMARKS.md table 2).

A Python script using the `openai` SDK with stream=True: TTFT = time to the first chunk,
tokens = number of chunks with content, speed = N / (E2E - TTFT). `--first any` takes the very
first chunk (the literal method: it counts the role-only chunk that OpenAI-compatible servers
send at once, the known bug class); `--first content` waits for the first chunk with text (the
charitable reading). Every chunk with content is timestamped with time.perf_counter() to get the
inter-token gaps. Prints a Markdown table of measured minus scripted, like `suite fidelity --url`.

Concurrency 1 uses the synchronous client, as the seed does; more uses AsyncOpenAI.
"""

import argparse
import asyncio
import math
import os
import time

from openai import AsyncOpenAI, OpenAI
from table import pct, row






def has_content(chunk):
    return bool(chunk.choices) and bool(chunk.choices[0].delta.content)


def account(t0, stamps, first_any, end, first, res):
    """stamps: perf_counter of every chunk with content; first_any: of the very first chunk."""
    if not stamps:
        res["failed"] += 1
        return
    first_at = first_any if first == "any" else stamps[0]
    res["ttft"].append(first_at - t0)
    res["gaps"].extend(b - a for a, b in zip(stamps, stamps[1:]))
    if len(stamps) >= 2:
        res["tpot"].append((stamps[-1] - stamps[0]) / (len(stamps) - 1))
    res["e2e"].append(end - t0)
    res["last"].append(len(stamps))


def run_sync(args, res):
    client = OpenAI(base_url=args.base_url, api_key="none", max_retries=0)
    for _ in range(args.n):
        t0 = time.perf_counter()
        stream = client.chat.completions.create(
            model=args.model,
            messages=[{"role": "user", "content": "Say something."}],
            max_tokens=args.max_tokens,
            stream=True,
        )
        stamps, first_any = [], None
        for chunk in stream:
            now = time.perf_counter()
            if first_any is None:
                first_any = now
            if has_content(chunk):
                stamps.append(now)
        account(t0, stamps, first_any, time.perf_counter(), args.first, res)


async def run_async(args, res):
    client = AsyncOpenAI(base_url=args.base_url, api_key="none", max_retries=0)
    per = math.ceil(args.n / args.concurrency)
    period = (args.ttft_ms + args.itl_ms * args.max_tokens) / 1000

    async def worker(i):
        await asyncio.sleep(period * i / args.concurrency)
        for _ in range(per):
            t0 = time.perf_counter()
            stream = await client.chat.completions.create(
                model=args.model,
                messages=[{"role": "user", "content": "Say something."}],
                max_tokens=args.max_tokens,
                stream=True,
            )
            stamps, first_any = [], None
            async for chunk in stream:
                now = time.perf_counter()
                if first_any is None:
                    first_any = now
                if has_content(chunk):
                    stamps.append(now)
            account(t0, stamps, first_any, time.perf_counter(), args.first, res)

    await asyncio.gather(*(worker(i) for i in range(args.concurrency)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="sim")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--ttft-ms", type=float, default=100)
    ap.add_argument("--itl-ms", type=float, default=20)
    ap.add_argument("--first", choices=["any", "content"], default="content")
    args = ap.parse_args()
    res = {"ttft": [], "gaps": [], "tpot": [], "e2e": [], "last": [], "failed": 0}
    load = open("/proc/loadavg").read().split()[:3]
    t = time.perf_counter()
    if args.concurrency == 1:
        run_sync(args, res)
    else:
        asyncio.run(run_async(args, res))
    wall = time.perf_counter() - t
    load2 = open("/proc/loadavg").read().split()[:3]
    ttft_s, itl_s = args.ttft_ms / 1000, args.itl_ms / 1000
    ms = lambda xs, off: [(x - off) * 1000 for x in xs]  # noqa: E731
    e2e_err = [(e - (ttft_s + itl_s * (n - 1))) * 1000 for e, n in zip(res["e2e"], res["last"])]
    label = f"seed-style openai SDK (first={args.first})"
    print(f"\n#### {label} — {args.concurrency} concurrent stream(s) against {args.base_url}\n")
    print(
        f"{len(res['ttft'])} probes in {wall:.1f} s; failed {res['failed']}; "
        f"loadavg {' '.join(load)} → {' '.join(load2)}; python {os.sys.version.split()[0]}\n"
    )
    print("| quantity | n | min ms | P50 ms | P99 ms | max ms |\n|---|---:|---:|---:|---:|---:|")
    print(row("TTFT − scripted", ms(res["ttft"], ttft_s)))
    print(row("TPOT − scripted ITL", ms(res["tpot"], itl_s)))
    print(row("each ITL gap − scripted", ms(res["gaps"], itl_s)))
    print(row("E2E − scripted last token", e2e_err))
    tt = sorted(ms(res["ttft"], ttft_s))
    gg = sorted(ms(res["gaps"], itl_s))
    print(
        f"\nSUMMARY tool=seed-openai-{args.first} streams={args.concurrency} "
        f"p99_ttft_err_ms={pct(tt, 99):.3f} p99_itl_err_ms={pct(gg, 99):.3f} load={' '.join(load2)}"
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The classic way to measure TTFT, as a client whose CPU `benches/client-cpu.sh` measures.

N sequential streaming chat completions with the `openai` SDK's synchronous client (one
keep-alive connection, as the SDK keeps it), stamping every chunk with time.perf_counter(), the
loop of most TTFT scripts. Prints one line: how many streams ended with content and how many
chunks carried content, so the caller can check that every stream was read whole.
"""

import argparse
import time

from openai import OpenAI


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="llm-probe-simulator")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    client = OpenAI(base_url=args.base_url, api_key="none", max_retries=0)
    ok = chunks = 0
    for _ in range(args.n):
        t0 = time.perf_counter()
        stream = client.chat.completions.create(
            model=args.model,
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=args.max_tokens,
            stream=True,
        )
        stamps, first = [], None
        for chunk in stream:
            now = time.perf_counter()
            if first is None:
                first = now - t0
            if chunk.choices and chunk.choices[0].delta.content:
                stamps.append(now)
        chunks += len(stamps)
        ok += bool(stamps)
    print(f"streams {ok} content_chunks {chunks}")


if __name__ == "__main__":
    main()

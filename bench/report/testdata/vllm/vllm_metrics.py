#!/usr/bin/env python3
# Copyright The llmprobe Authors
# SPDX-License-Identifier: Apache-2.0
"""vllm bench serve's figures over llmprobe's per-request lines.

Reads the JSON lines of `llmprobe bench --requests` and writes, for every
stage and target, the figures vLLM's calculate_metrics
(vllm/benchmarks/serve.py) computes from its RequestFuncOutputs, under the
keys of vLLM's result JSON. It is the reference bench/report's figures are
checked against (serving_test.go), written apart from the Go code and
sharing none of it: the Python standard library only, numpy's functions
written out below.

Each line becomes one of vLLM's outputs:

    start_time    = sent_offset_seconds + client_wait_seconds  (llmprobe's
                    "start", from which TTFT and E2E run, on the run's own
                    clock; a line without sent_offset_seconds: sent, a
                    wall-clock time, from the stage's first)
    ttft          = ttft_seconds
    latency       = e2e_seconds
    itl           = itl_seconds
    output_tokens = output_tokens                (the server's usage)
    prompt_len    = prompt_tokens                (the server's usage)
    success       = outcome == "success"

of a stage's measured requests: warm-up lines and those cancelled at the
grace's end (outcome cancelled_at_grace) are left out. vLLM's duration is
its own clock, started before its first inter-arrival gap; here, as in
llmprobe, it runs from the first start to the last end (start + latency),
successes and failures alike.

Usage:
    vllm_metrics.py requests.jsonl [--percentiles=90,99]
        [--goodput ttft:MS tpot:MS e2el:MS] > expected.json
"""

import argparse
import json
import math
import sys
from datetime import datetime, timezone


def unix_ns(s):
    """An RFC 3339 time with up to nanoseconds, as integer nanoseconds."""
    if s.endswith("Z"):
        s, offset = s[:-1], "+00:00"
    else:
        s, offset = s[:-6], s[-6:]
    whole, _, frac = s.partition(".")
    t = datetime.strptime(whole + offset, "%Y-%m-%dT%H:%M:%S%z")
    return int(t.timestamp()) * 10**9 + int((frac + "000000000")[:9])


def np_percentile(values, p):
    """numpy.percentile(values or 0, p) with the default linear method."""
    if not values:
        return 0.0
    x = sorted(values)
    h = (len(x) - 1) * p / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(x) - 1)
    return x[lo] + (h - lo) * (x[hi] - x[lo])


def np_mean(values):
    return sum(values) / len(values) if values else 0.0


def np_std(values):
    """numpy.std(values or 0): the population standard deviation."""
    if not values:
        return 0.0
    m = np_mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def percent_word(p):
    return str(int(p)) if int(p) == p else str(p)


def calculate_metrics(outputs, dur_s, percentiles, goodput):
    """vLLM's calculate_metrics, for outputs without a tokenizer."""
    actual_output_lens, total_input, completed, good_completed = [], 0, 0, 0
    itls, tpots, all_tpots, ttfts, e2els = [], [], [], [], []
    for o in outputs:
        if o["success"]:
            output_len = o["output_tokens"]
            if not output_len:
                output_len = 1  # vLLM without a tokenizer
            actual_output_lens.append(output_len)
            total_input += o["prompt_len"]
            tpot = 0.0
            if output_len > 1:
                tpot = (o["latency"] - o["ttft"]) / (output_len - 1)
                tpots.append(tpot)
            all_tpots.append(tpot)
            itls += o["itl"]
            ttfts.append(o["ttft"])
            e2els.append(o["latency"])
            completed += 1
        else:
            actual_output_lens.append(0)

    if goodput:
        valid_metrics, slo_values = [], []
        if "ttft" in goodput:
            valid_metrics.append(ttfts)
            slo_values.append(goodput["ttft"] / 1000)
        if "tpot" in goodput:
            valid_metrics.append(all_tpots)
            slo_values.append(goodput["tpot"] / 1000)
        if "e2el" in goodput:
            valid_metrics.append(e2els)
            slo_values.append(goodput["e2el"] / 1000)
        for req_metric in zip(*valid_metrics):
            if all(s >= r for s, r in zip(slo_values, req_metric)):
                good_completed += 1

    max_output_tokens_per_s, max_concurrent_requests = 0.0, 0
    successful = [o for o in outputs if o["success"]]
    if successful:
        min_start = min(o["start_time"] for o in successful)
        max_end = max(o["start_time"] + o["latency"] for o in successful)
        duration_seconds = int(math.ceil(max_end - min_start)) + 1
        tokens_per_second = [0] * duration_seconds
        for o in successful:
            t = o["start_time"] + o["ttft"]
            token_times = [t]
            for g in o["itl"]:
                t += g
                token_times.append(t)
            for tt in token_times:
                b = int(tt - min_start)
                if 0 <= b < duration_seconds:
                    tokens_per_second[b] += 1
        events = []
        for o in successful:
            events.append((o["start_time"], 1))
            events.append((o["start_time"] + o["latency"], -1))
        events.sort(key=lambda e: (e[0], e[1]))
        cur = peak = 0
        for _, d in events:
            cur += d
            peak = max(peak, cur)
        max_output_tokens_per_s = float(max(tokens_per_second))
        max_concurrent_requests = peak

    total_output = sum(actual_output_lens)
    result = {
        "duration": dur_s,
        "completed": completed,
        "failed": len(outputs) - completed,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": completed / dur_s,
        "request_goodput": good_completed / dur_s if goodput else None,
        "output_throughput": total_output / dur_s,
        "total_token_throughput": (total_input + total_output) / dur_s,
        "max_output_tokens_per_s": max_output_tokens_per_s,
        "max_concurrent_requests": max_concurrent_requests,
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        result[f"mean_{name}_ms"] = np_mean(values) * 1000
        result[f"median_{name}_ms"] = np_percentile(values, 50) * 1000
        result[f"std_{name}_ms"] = np_std(values) * 1000
        for p in percentiles:
            result[f"p{percent_word(p)}_{name}_ms"] = np_percentile(values, p) * 1000
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("requests")
    ap.add_argument("--percentiles", default="90,99")
    ap.add_argument("--goodput", nargs="*", default=[], metavar="KEY:MS")
    args = ap.parse_args()
    percentiles = [float(p) for p in args.percentiles.split(",")]
    goodput = {k: float(v) for k, v in (g.split(":") for g in args.goodput)}

    populations = {}
    with open(args.requests) as f:
        for line in f:
            r = json.loads(line)
            if r.get("warmup") or r["outcome"] == "cancelled_at_grace":
                continue
            populations.setdefault((r["stage"], r["target"]), []).append(r)

    out = {"percentiles": percentiles, "goodput": goodput or None, "stages": []}
    for (stage, target), recs in sorted(populations.items()):
        t0 = min(unix_ns(r["sent"]) for r in recs)
        outputs = []
        for r in recs:
            sent = r.get("sent_offset_seconds")
            if sent is None:
                sent = (unix_ns(r["sent"]) - t0) / 1e9
            start = sent + r.get("client_wait_seconds", 0.0)
            outputs.append({
                "start_time": start,
                "ttft": r["ttft_seconds"] if r["ttft_seconds"] is not None else 0.0,
                "latency": r["e2e_seconds"],
                "itl": r["itl_seconds"] or [],
                "output_tokens": r["output_tokens"],
                "prompt_len": r["prompt_tokens"],
                "success": r["outcome"] == "success",
            })
        first = min(o["start_time"] for o in outputs)
        last = max(o["start_time"] + o["latency"] for o in outputs)
        metrics = calculate_metrics(outputs, last - first, percentiles, goodput)
        out["stages"].append({"stage": stage, "target": target, "metrics": metrics})
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

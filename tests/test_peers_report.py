#!/usr/bin/env python3
"""tools/peers.py --report without torch or a GPU: the peer report built from made-up measurements of the
cases/perf points is valid against docs/report.schema.json, its rows carry the case and point labels attnbench's
own reports give those points, the statistics attnbench would compute from the same samples, and commands that
select that row alone; the schema accepts peer rows only in the shape described, and still refuses what it
refused in attnbench's own reports. --json's rows are as before.

    python3 tests/test_peers_report.py

Exit codes: 0 passed; 1 a check failed (each on one line); 77 skipped (no jsonschema, or no tomllib/tomli).
"""
import copy
import json
import os
import shlex
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
SCHEMA = os.path.join(HERE, "..", "docs", "report.schema.json")

# The (case, points) attnbench wrote for these case files: read from the report of a real
# `attnbench run cases/perf -o perf.json` on an H100 (the rows' "case" and "point", in the
# order of its rows), not derived from peers.py.
EXPECTED = {
    "attention-bf16-b4-h16-s4096-d128": ["causal=false", "causal=true"],
    "attention-fp16-b32-h32-s2048-d128": [""],
    "rope-bf16-b4-h16-s4096-d128": ["causal=false rope=none", "causal=false rope=neox", "causal=false rope=gptj",
                                    "causal=true rope=none", "causal=true rope=neox", "causal=true rope=gptj"],
    "softcap-bf16-b4-h16-s4096-d128": ["causal=false softcap=0", "causal=false softcap=50",
                                       "causal=true softcap=0", "causal=true softcap=50"],
    "window-decode-bf16-b1-kv8-ctx131072": ["context=4096 window=0", "context=4096 window=4096",
                                            "context=131072 window=0", "context=131072 window=4096"],
    "sparse-bf16-b1-h16-s16384-d128": ["sparse_block=0", "sparse_block=128"],
    "softmax-fp32-65536x1024": [""],
    "pipeline-bf16-p1024-g128": [""],
}
# peers.py --json's labels of some of those points, from a real run's --json (unchanged by --report).
JSON_LABELS = ["rope-bf16-b4-h16-s4096-d128 [causal=false,rope=none]", "pipeline-bf16-p1024-g128 prefill",
               "window-decode-bf16-b1-kv8-ctx131072 [context=4096,window=0]", "softmax-fp32-65536x1024"]

DEVICE = {"name": "NVIDIA H100 80GB HBM3", "index": 0, "sm_count": 132, "compute_capability": "9.0",
          "memory_bytes": 85017493504, "l2_bytes": 52428800, "driver": "13.0", "cuda_runtime": "13.0",
          "pci_bus_id": "0000:00:06.0", "sm_clock_max_mhz": 1980.0, "nvml": True}
META = dict(command="python3 tools/peers.py --report peers-report.json", date="2026-11-27T02:19:00Z",
            elapsed_ms=61234.5, complete=True, device=DEVICE, library="torch", version="2.11.0+cu130",
            flush="write", script="tools/peers.py", budget_ms=100, max_samples=500)
MHZ = [1980, 1755, 1500, 1965]  # made up: two readings below 90% of 1980
VERIFY = {"verify": {"max_abs": 0.0, "max_rel": 0.0, "rel_l2": 0.0, "mismatches": 0, "elements_checked": 1,
                     "rows_checked": 1, "rows_total": 1, "nonfinite": 0, "worst": {"at": "", "got": 0, "ref": 0},
                     "atol": 0.0, "rtol": 0.0, "trials": 1},
          "verify_time": {"allocate_ms": 0, "inputs_ms": 0, "reference_ms": 0, "release_ms": 0, "point_ms": 0,
                          "check_ms": 0}}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def close(a, b, rel=1e-12):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def made_up_samples(i):
    """An odd or even count of distinct times, not in order."""
    n = 5 + i % 4
    return [0.1 * (1 + i % 7) * (1 + 0.013 * ((k * 7) % n)) for k in range(n)]


def errors(validator, doc):
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(doc)]


def check_labels(peers):
    for case, points in EXPECTED.items():
        got = list(peers.case_points(peers.CASES / f"{case}.toml"))
        check([p["point"] for p in got] == points, f"{case}: points {[p['point'] for p in got]}, want {points}")
        check(all(p["case"] == case for p in got), f"{case}: case names {[p['case'] for p in got]}")
    labels = {p["label"] for p in peers.select("*")}
    for label in JSON_LABELS:
        check(label in labels, f"--json label {label!r} is no longer made")
    # app/case.cpp's show() and ranges, on a case file of every kind of sweep value (the labels follow
    # its rules: ints, strings as they are, floats as C++ streams print them, booleans, lists).
    for value, want in ((True, "true"), (False, "false"), (50.0, "50"), (0.5, "0.5"), (1e-7, "1e-07"),
                        (123456789.0, "1.23457e+08"), (8, "8"), ("bf16", "bf16"), ([1, 7, 1000], "[1,7,1000]"),
                        ([[4096, 128], [1, 2]], "[[4096,128],[1,2]]")):
        check(peers.show(value) == want, f"show({value!r}) is {peers.show(value)!r}, want {want!r}")
    for text, want in (("1024:16384:*2", [1024, 2048, 4096, 8192, 16384]), ("64:256:+64", [64, 128, 192, 256]),
                       ("1:10:*3", [1, 3, 9]), ("5:5:+1", [5])):
        check(peers.range_values(text) == want, f"range {text}: {peers.range_values(text)}")
    for bad in ("8:4:+1", "1:8:*1", "a:8:+1", "0:8:*2"):
        try:
            peers.range_values(bad)
            check(False, f"range {bad} accepted")
        except ValueError:
            pass
    check(not peers.looks_like_range("1024") and peers.looks_like_range("1:2:+1"), "looks_like_range")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "made-up.toml")
        with open(path, "w") as f:
            f.write('name = "custom"\nop = "attention"\ndtype = "bf16"\n[shape]\nbatch = 1\nheads = 2\n'
                    'head_dim = 64\n[sweep]\nseq_q = "1024:2048:*2"\ndtype = ["fp16", "bf16"]\n'
                    'causal = [true]\nsoftcap = [0.0, 30.5]\n')
        import pathlib
        got = list(peers.case_points(pathlib.Path(path)))
        want = [f"seq_q={s} dtype={d} causal=true softcap={c}" for s in (1024, 2048) for d in ("fp16", "bf16")
                for c in ("0", "30.5")]
        check([p["point"] for p in got] == want, f"made-up sweep: {[p['point'] for p in got]}")
        check({p["case"] for p in got} == {"custom"}, "a case's name key names it")
        check([p["dtype"] for p in got[:4]] == ["fp16", "fp16", "bf16", "bf16"], "a dtype sweep sets the dtype")
        check(got[0]["label"] == "made-up [seq_q=1024,dtype=fp16,causal=true,softcap=0.0]",
              f"--json label {got[0]['label']!r}")


def check_fp8_skipped(peers):
    """SDPA and cuBLAS take no fp8 inputs: fp8 points are skipped with the reason, not timed as unavailable."""
    fp8 = [p for p in peers.select("*") if p["dtype"] == "fp8_e4m3"]
    check(len(fp8) >= 4, f"the fp8 perf cases' points: {len(fp8)}")
    for p in fp8:
        check(isinstance(p["plan"], str) and p["plan"].startswith("skip: ") and "fp8_e4m3" in p["plan"],
              f"{p['label']}: plan {p['plan']!r}")
    bf16 = [p for p in peers.select("attention-fp8-*") if p["dtype"] == "bf16"]
    check(bf16 and all(not isinstance(p["plan"], str) for p in bf16), "the fp8 cases' bf16 points keep their peers")


def check_softcap_peers(peers):
    """Soft-capped prefill has one public peer here, FlexAttention: the capped points time it alone, the uncapped
    points of the same case time it beside SDPA (its own yardstick for the cap's cost); decode's cap has none."""
    plans = {p["point"]: p["plan"] for p in peers.select("softcap-bf16-*")}
    for causal in ("false", "true"):
        capped, plain = plans.get(f"causal={causal} softcap=50"), plans.get(f"causal={causal} softcap=0")
        check(not isinstance(capped, str) and capped[1] == ["flex"], f"softcap 50, causal={causal}: plan {capped}")
        check(not isinstance(plain, str) and plain[1] == ["flash", "cudnn", "flex"], f"softcap 0: plan {plain}")
    capped_decode = [p for p in peers.select("softcap-decode-*") if p["shape"].get("softcap")]
    check(capped_decode and all(isinstance(p["plan"], str) for p in capped_decode), "decode's cap has no peer")
    plain_attention = list(peers.select("attention-bf16-*"))
    check(plain_attention and all("flex" not in p["plan"][1] for p in plain_attention), "no flex without a cap key")


def made_up_results(peers):
    """One result for each peer of every cases/perf point that has peers: made-up samples and clock readings;
    the first cudnn peer unavailable, as a backend that refuses a shape is."""
    results, refused = [], False
    for i, p in enumerate(peers.select("*")):
        if isinstance(p["plan"], str):
            continue
        kind, names, s, flops, nbytes = p["plan"]
        for peer in names:
            r = dict(point=p, peer=peer, flops=flops, bytes=nbytes)
            if peer == "cudnn" and not refused:
                refused = True
                r["unavailable"] = "No available kernel. Aborting execution."
            else:
                r.update(samples_ms=made_up_samples(len(results)), mhz=MHZ[: 1 + len(results) % 4],
                         elapsed_ms=10.0 + len(results))
            results.append(r)
    return results


def check_rows(peers, results, doc):
    check(len(doc["rows"]) == len(results), f"{len(doc['rows'])} rows for {len(results)} results")
    names = {"flash": "torch_sdpa_flash", "cudnn": "torch_sdpa_cudnn", "efficient": "torch_sdpa_efficient",
             "cublas": "torch_matmul", "torch.softmax": "torch_softmax", "flex": "torch_flex",
             "torch_sort": "torch_sample_sort"}
    for r, row in zip(results, doc["rows"]):
        p, at = r["point"], f"row {row['case']} [{row['point']}] {row['variant']}"
        check((row["case"], row["point"]) == (p["case"], p["point"]), f"{at}: labels")
        want = names[r["peer"]] + {"pipeline": "_prefill", "mha": "_layer", "ragged": "_prefill"}.get(p["op"], "")
        check(row["variant"] == want, f"{at}: variant, want {want}")
        check(row["op"] == p["op"] and row["dtype"] == p["dtype"] and row["baseline"] is False, f"{at}: op, dtype")
        check(row["flops"] == r["flops"] and row["bytes"] == r["bytes"], f"{at}: flops and bytes are not the plan's")
        check(row["peer"] == {"library": "torch", "version": "2.11.0+cu130", "backend": r["peer"],
                              "flush": "write"}, f"{at}: peer {row['peer']}")
        # The command selects exactly this row: its options parse, its point is the one point and its
        # variant one of that point's peers.
        words = shlex.split(row["command"])
        check(words[:2] == ["python3", "tools/peers.py"], f"{at}: command {row['command']}")
        args = peers.parser().parse_args(words[2:])
        chosen = list(peers.select(args.cases, args.point))
        check([(c["case"], c["point"]) for c in chosen] == [(p["case"], p["point"])],
              f"{at}: its command selects {[(c['case'], c['point']) for c in chosen]}")
        check([n for n in chosen[0]["plan"][1] if peers.variant_name(p["op"], n) == args.variant] == [r["peer"]],
              f"{at}: its command's --variant {args.variant} is not this peer alone")
        check(args.flush == "write" and args.report is None and args.json is None, f"{at}: command options")
        if "unavailable" in r:
            check(row["status"] == "skipped" and row["reason"] == r["unavailable"] and "timing" not in row,
                  f"{at}: an unavailable peer is not a skipped row with its reason")
            continue
        check(row["status"] == "peer" and "reason" not in row, f"{at}: status {row['status']}")
        t, samples = row["timing"], r["samples_ms"]
        # attnbench's statistics, computed here another way: interpolated quartiles, MAD noise.
        median = statistics.median(samples)
        q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        noise = 1.4826 * statistics.median([abs(x - median) for x in samples]) / median
        for key, want in (("median_ms", median), ("q1_ms", q1), ("q3_ms", q3), ("min_ms", min(samples)),
                          ("max_ms", max(samples)), ("mean_ms", statistics.fmean(samples)), ("noise", noise)):
            check(close(t[key], want), f"{at}: {key} {t[key]}, want {want}")
        check(t["samples"] == len(samples) and t["mode"] == "cold" and t["launches_per_sample"] == 1 and
              t["hold_timeouts"] == 0 and t["elapsed_ms"] == r["elapsed_ms"], f"{at}: timing {t}")
        check(t["samples_ms"] == [float(f"{x:.7g}") for x in samples],
              f"{at}: samples_ms are not every sample in order")
        readings = r["mhz"]
        check(t["clock"] == {"mean_mhz": sum(readings) / len(readings), "max_mhz": 1980.0, "samples": len(readings),
                             "low_samples": sum(m < 0.9 * 1980 for m in readings)}, f"{at}: clock {t['clock']}")
        check(row["timings"] == {"cold": {k: v for k, v in t.items() if k != "samples_ms"}},
              f"{at}: timings.cold is not timing without its samples")
        check(close(row["tflops"], r["flops"] / (median * 1e9)) and close(row["gbps"], r["bytes"] / (median * 1e6)),
              f"{at}: rates")
        # --json's row is as it always was: the upper middle sample, tflops null without flops.
        old = peers.json_row(r, "write")
        ms = sorted(samples)[len(samples) // 2]
        check(list(old) == ["case", "op", "dtype", "peer", "flush", "ms", "samples", "sm_mhz", "gbps", "tflops"] and
              old["case"] == p["label"] and old["ms"] == ms and old["sm_mhz"] == readings[-1] and
              old["tflops"] == (r["flops"] / ms / 1e9 if r["flops"] else None), f"{at}: --json row {old}")
    variants = {(row["case"], row["variant"]) for row in doc["rows"]}
    for case, variant in (("pipeline-bf16-p1024-g128", "torch_sdpa_flash_prefill"),
                          ("attention-fp32-b8-h16-s1024-d64", "torch_sdpa_efficient"),
                          ("gemm-bf16-nt-8192", "torch_matmul"), ("softmax-fp32-65536x1024", "torch_softmax"),
                          ("attention-bf16-b4-h16-s4096-d128", "torch_sdpa_cudnn")):
        check((case, variant) in variants, f"no {variant} row for {case}")


def check_schema_rules(validator, doc, check_schema):
    """The schema takes peer rows as described and nothing else; attnbench's own reports are held as before."""
    peer = next(i for i, r in enumerate(doc["rows"]) if r["status"] == "peer")
    skipped = next(i for i, r in enumerate(doc["rows"]) if r["status"] == "skipped")

    def refused(what, change, base=doc):
        d = copy.deepcopy(base)
        change(d)
        check(errors(validator, d), f"the schema accepts {what}")

    refused("a peer row that verified", lambda d: d["rows"][peer].__setitem__("status", "verified"))
    refused("a peer row with a verify", lambda d: d["rows"][peer].update(copy.deepcopy(VERIFY)))
    refused("a peer row without its peer", lambda d: d["rows"][peer].pop("peer"))
    refused("a peer row without its timing",
            lambda d: [d["rows"][peer].pop(k) for k in ("timing", "timings", "tflops", "gbps")])
    refused("a peer row with a speedup", lambda d: d["rows"][peer].__setitem__("speedup", 1.0))
    refused("a peer object with another key", lambda d: d["rows"][peer]["peer"].__setitem__("extra", 1))
    refused("a peer object without its flush", lambda d: d["rows"][peer]["peer"].pop("flush"))
    refused("a skipped peer row with a timing",
            lambda d: d["rows"][skipped].update({k: d["rows"][peer][k]
                                                 for k in ("timing", "timings", "tflops", "gbps")}))
    refused("a peer report that says it is attnbench's (it has no ceilings)",
            lambda d: d["attnbench"].__setitem__("version", "0.1.0"))
    for what, r in check_schema.drifts(doc):
        check(errors(validator, r), f"the schema accepts {what} (check_schema.py --drift)")
    # What torch cannot tell may be left out of a peer report's device, and only there.
    lean = copy.deepcopy(doc)
    for key in ("driver", "pci_bus_id", "l2_bytes"):
        del lean["device"][key]
    lean["device"].update(sm_clock_max_mhz=0, nvml=False)
    check(not errors(validator, lean), f"a peer report without what torch cannot tell: {errors(validator, lean)[:3]}")
    refused("a peer report's device without its name", lambda d: d["device"].pop("name"), lean)
    # attnbench's own report (one verified row, made from a peer row): floors, ceilings and the whole
    # device are still required of it.
    ours = copy.deepcopy(doc)
    ours["attnbench"]["version"] = "0.1.0"
    ours["ceilings"] = {k: 1.0 for k in ("copy_gbps", "read_gbps", "write_gbps", "fp32_tflops", "tf32_tflops",
                                         "fp16_tflops", "bf16_tflops", "mma_sync_bf16_tflops", "wgmma_bf16_tflops")}
    row = ours["rows"][peer]
    ours["rows"] = [row]
    del row["peer"]
    row.update(status="verified", variant="flash_mma", floor_ms=0.1, floor_compute_ms=0.1, floor_memory_ms=0.01,
               bound="compute", pct_of_floor=50.0, **copy.deepcopy(VERIFY))
    if check(not errors(validator, ours), f"attnbench's report made here is not valid: {errors(validator, ours)[:3]}"):
        for key in ("floor_ms", "bound", "pct_of_floor"):
            refused(f"attnbench's timed row without {key}", lambda d, key=key: d["rows"][0].pop(key), ours)
        for key in ("driver", "pci_bus_id", "l2_bytes"):
            refused(f"attnbench's report without device.{key}", lambda d, key=key: d["device"].pop(key), ours)
        refused("attnbench's run without ceilings", lambda d: d.pop("ceilings"), ours)
        refused("attnbench's row with a peer object",
                lambda d: d["rows"][0].__setitem__("peer", doc["rows"][peer]["peer"]), ours)


def main():
    try:
        import jsonschema
    except ImportError:
        print("skipped: python3-jsonschema is not installed (.ci/deps installs it; or pip install jsonschema)")
        return 77
    sys.path.insert(0, HERE)
    sys.path.insert(0, TOOLS)  # peers.py
    try:
        import peers
    except ImportError as e:  # tomllib is Python 3.11's; tomli before it
        print(f"skipped: tools/peers.py cannot be imported here ({e}): it needs Python 3.11 or tomli")
        return 77
    import check_schema
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)

    check_labels(peers)
    check_fp8_skipped(peers)
    check_softcap_peers(peers)
    check_ragged_peer(peers)
    results = made_up_results(peers)
    doc = peers.peer_report(results, META)
    check(not errors(validator, doc), f"the peer report is not valid: {errors(validator, doc)[:5]}")
    text = json.dumps(doc, indent=1, sort_keys=True, allow_nan=False)
    check(json.loads(text) == doc, "the report does not survive json")
    check(doc["attnbench"] == {"version": "peers", "command": META["command"], "date": META["date"], "mode": "run",
                               "timing_mode": "cold", "load_ms": 0.0, "elapsed_ms": META["elapsed_ms"],
                               "complete": True} and doc["device"] == DEVICE and doc["schema"] == 4,
          f"the report's head: {doc['attnbench']}")
    check_rows(peers, results, doc)
    check_schema_rules(validator, doc, check_schema)
    # A median of 0 ms gives no rate: the row is skipped, not a division by zero.
    zero = dict(results[-1], samples_ms=[0.0, 0.0, 0.001], mhz=[], elapsed_ms=1.0)
    row = peers.peer_report([zero], META)["rows"][0]
    check(row["status"] == "skipped" and "timing" not in row, f"a 0 ms median: {row.get('status')}")
    # An unfinished report (rewritten after every row) is valid too.
    check(not errors(validator, peers.peer_report(results[:3], dict(META, complete=False))), "an unfinished report")
    check("torch" not in sys.modules, "building the report imported torch")

    for f in failures:
        print(f"test_peers_report: FAILED: {f}")
    if failures:
        return 1
    print(f"ok: a peer report of {len(doc['rows'])} rows from {len(EXPECTED)} checked cases' labels and every "
          "cases/perf point is valid, its labels, statistics and commands are attnbench's and its own")
    return 0


def check_ragged_peer(peers):
    """The ragged cases' peer: vLLM's grammar read as app/ops/batch_mix.cpp reads it (the examples of
    tests/test_case.cpp's BatchMix tests), and only the prefill part (query_len > 1) timed, its FLOPs those of
    the causal pairs within each sequence."""
    check(peers.batch_mix("2q2k_32q1s1k") == [(2048, 2048)] * 2 + [(1, 1024)] * 32, "2q2k_32q1s1k")
    check(peers.batch_mix("q64s8k") == [(64, 8192)], "q64s8k")
    check(peers.batch_mix("s100_3spec4s4k") == [(1, 100)] + [(4, 4096)] * 3, "s100_3spec4s4k")
    for bad in ("2q2k__s1", "q5s3", "2x1k"):
        try:
            peers.batch_mix(bad)
            check(False, f"{bad} was read")
        except ValueError:
            pass
    s = peers.defaults("ragged", "bf16", {"sequences": [[1, 100], [3, 5], [2, 2]], "heads": 4, "kv_heads": 2,
                                          "head_dim": 8})
    kind, who, dims, flops, _ = peers.plan("ragged", "bf16", s)
    # (3, 5): queries at positions 2, 3, 4 see 3 + 4 + 5 keys; (2, 2): 1 + 2; the decode is not in it.
    check(kind == "ragged" and who == ["flex"] and dims["prefill"] == [(3, 5), (2, 2)] and
          flops == 4 * 4 * 8 * (12 + 3), f"the ragged peer's plan: {kind} {who} {flops}")
    check(peers.variant_name("ragged", "flex") == "torch_flex_prefill", "the ragged peer's variant")
    s = peers.defaults("ragged", "bf16", {"mix": "8s1k", "heads": 4, "head_dim": 8})
    check(str(peers.plan("ragged", "bf16", s)).startswith("skip: no prefill part"), "an all-decode batch")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes the schema 4 fixtures of tests/compare.cmake's verdict tests, as `run` would:

    samples-base.json   four rows of 20 samples each
    samples-new.json    the same rows: one 0.1% slower (SAME), one 25% slower with tight
                        samples (SLOW), one 20% faster (FAST), and the noisy regression
                        compare used to call SAME: BASE median 1.0 ms with quartiles
                        0.7-1.3, NEW median 1.25 with quartiles 0.95-1.6 (UNSURE)
    noisy-new.json      samples-base.json with only the noisy row changed so
    missing-new.json    samples-new.json without its last row (compare fails: a row went missing)
    goldens/            the golden reports of `compare --golden`, one per card, named by
                        golden_file_name: nvidia-h200.json holds samples-base.json's rows, and
                        nvidia-h100-80gb-hbm3.json the same rows twice as slow, so that a
                        report compared with the wrong card's golden file would come out FAST
    golden-slow.json    an H200 run 15% slower than its golden on every tight row (SLOW at the
                        10% a golden gate uses); the noisy row as the golden's
    golden-noise.json   an H200 run within its golden's noise: the tight rows 0.5% slower,
                        the noisy row 25% slower, inside that row's own spread
    golden-a100.json    a run on a card that has no golden file

Run from anywhere: python3 tests/compare/make-samples.py (it writes beside itself).
"""
import json
import os


def quantile(sorted_values, q):
    """As app/stats.cpp: linear between neighbours."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def quartile_samples(q1, median, q3):
    """20 samples whose quartiles are exactly q1, median, q3 (the interpolation puts them
    between samples 4 and 5, 9 and 10, 14 and 15, set equal), the rest spread evenly."""
    at = [(0, 2 * q1 - median), (4, q1), (5, q1), (9, median), (10, median), (14, q3), (15, q3), (19, 2 * q3 - median)]
    v = [0.0] * 20
    for (i0, a), (i1, b) in zip(at, at[1:]):
        for i in range(i0, i1 + 1):
            v[i] = a + (b - a) * (i - i0) / max(1, i1 - i0)
    v = [float(f"{x:.7g}") for x in v]  # as report.cpp writes samples
    # The order taken is not the sorted order: interleave the halves.
    return [v[i // 2] if i % 2 == 0 else v[10 + i // 2] for i in range(20)]


def timing(samples, with_samples=True):
    s = sorted(samples)
    median = quantile(s, 0.5)
    dev = sorted(abs(x - median) for x in s)
    t = {"mode": "cold", "median_ms": median, "min_ms": s[0], "max_ms": s[-1], "q1_ms": quantile(s, 0.25),
         "q3_ms": quantile(s, 0.75), "mean_ms": sum(s) / len(s), "noise": 1.4826 * quantile(dev, 0.5) / median,
         "samples": len(s), "launches_per_sample": 1, "elapsed_ms": 101.5, "hold_timeouts": 0}
    if with_samples:
        t["samples_ms"] = samples
    return t


def row(point, samples):
    cols = int(point.split("=")[1])
    work_bytes = 2 * 4 * 4096 * cols
    t = timing(samples)
    median = t["median_ms"]
    floor_ms = work_bytes / (4100 * 1e6)
    return {"case": "softmax-fp32", "point": point, "op": "softmax", "dtype": "fp32", "variant": "warp_online",
            "baseline": False, "status": "verified",
            "command": f"build/bin/attnbench run cases/softmax/fp32.toml --set shape.cols={cols} -k warp_online --mode cold",
            "verify": {"max_abs": 1.2e-7, "max_rel": 3.1e-6, "rel_l2": 4e-8, "mismatches": 0,
                       "elements_checked": 1024 * cols, "rows_checked": 1024, "rows_total": 4096, "nonfinite": 0,
                       "worst": {"at": "(0, 0, 17, 3)", "got": 0.25, "ref": 0.25000003}, "atol": 1e-5, "rtol": 1e-4,
                       "trials": 2},
            "verify_time": {"allocate_ms": 0.8, "inputs_ms": 2.1, "reference_ms": 35.0, "release_ms": 0.3,
                            "point_ms": 410.0, "check_ms": 1.9},
            "flops": 0, "bytes": work_bytes, "timing": t, "timings": {"cold": timing(samples, False)},
            "tflops": 0, "gbps": work_bytes / (median * 1e6), "floor_ms": floor_ms, "floor_compute_ms": 0,
            "floor_memory_ms": floor_ms, "bound": "memory", "pct_of_floor": 100 * floor_ms / median}


def report(rows, card="NVIDIA H200"):
    return {"schema": 4,
            "attnbench": {"version": "0.1.0", "command": "build/bin/attnbench run cases/softmax/fp32.toml -o r.json",
                          "date": "2026-12-01T00:00:00Z", "mode": "run", "timing_mode": "per case", "load_ms": 3.2,
                          "elapsed_ms": 4200.0, "complete": True},
            "device": {"name": card, "index": 0, "sm_count": 132, "compute_capability": "9.0",
                       "memory_bytes": 150754820096, "l2_bytes": 52428800, "driver": "13.0", "cuda_runtime": "13.0",
                       "pci_bus_id": "00000000:19:00.0", "sm_clock_max_mhz": 1980, "nvml": False},
            "ceilings": {"copy_gbps": 4100, "read_gbps": 4400, "write_gbps": 4200, "fp32_tflops": 51,
                         "tf32_tflops": 380, "fp16_tflops": 720, "bf16_tflops": 730, "mma_sync_bf16_tflops": 610,
                         "wgmma_bf16_tflops": 880},
            "datasheet": {"card": "H200 SXM", "hbm_gbps": 4800, "fp32_tflops": 67, "tf32_tflops": 494.7,
                          "fp16_tflops": 989.4, "bf16_tflops": 989.4},
            "rows": rows}


STEADY = ("cols=1000", quartile_samples(0.0099, 0.01, 0.0101), quartile_samples(0.00991, 0.01001, 0.01011))
SLOWER = ("cols=4096", quartile_samples(0.0198, 0.02, 0.0202), quartile_samples(0.02475, 0.025, 0.02525))
FASTER = ("cols=16384", quartile_samples(0.0396, 0.04, 0.0404), quartile_samples(0.03168, 0.032, 0.03232))
NOISY = ("cols=65536", quartile_samples(0.7, 1.0, 1.3), quartile_samples(0.95, 1.25, 1.6))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    base = [row(point, samples) for point, samples, _ in (STEADY, SLOWER, FASTER, NOISY)]
    new = [row(point, samples) for point, _, samples in (STEADY, SLOWER, FASTER, NOISY)]
    noisy = base[:3] + [new[3]]
    def scaled(samples, by):
        return [float(f"{x * by:.7g}") for x in samples]

    tight = (STEADY, SLOWER, FASTER)
    golden_h100 = [row(point, scaled(samples, 2)) for point, samples, _ in tight + (NOISY,)]
    golden_slow = [row(point, scaled(samples, 1.15)) for point, samples, _ in tight] + [base[3]]
    golden_noise = [row(point, scaled(samples, 1.005)) for point, samples, _ in tight] + [new[3]]
    os.makedirs(os.path.join(here, "goldens"), exist_ok=True)
    for name, rows, card in (("samples-base.json", base, "NVIDIA H200"), ("samples-new.json", new, "NVIDIA H200"),
                             ("noisy-new.json", noisy, "NVIDIA H200"), ("missing-new.json", new[:3], "NVIDIA H200"),
                             ("goldens/nvidia-h200.json", base, "NVIDIA H200"),
                             ("goldens/nvidia-h100-80gb-hbm3.json", golden_h100, "NVIDIA H100 80GB HBM3"),
                             ("golden-slow.json", golden_slow, "NVIDIA H200"),
                             ("golden-noise.json", golden_noise, "NVIDIA H200"),
                             ("golden-a100.json", golden_slow, "NVIDIA A100-SXM4-80GB")):
        with open(os.path.join(here, name), "w") as f:
            json.dump(report(rows, card), f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()

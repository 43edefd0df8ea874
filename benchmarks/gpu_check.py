"""Every GPU test and benchmark of tacl-scale in one run; ``scripts/gpu_check.sh``
calls it after installing the offline bundle.

    python benchmarks/gpu_check.py --bundle .gpu_bundle --results DIR [--quick]

1. environment: GPU, versions, measured dense bf16 matmul peak;
2. the CUDA tests (``tests/test_gpu.py``, ``tests/test_tacl_triton.py``) under pytest;
3. the fused Triton TaCL loss against the PyTorch reference (fwd+bwd ms, peak extra
   MiB; B=32, L=256, D=768/1024);
4. end-to-end training throughput at BERT-base shape, length 256, bf16, padded and
   unpadded, over micro-batch sizes at global batch 256 (``bench_train_gpu.py``);
5. the issue's targets, met or not.

Prints one table and writes ``DIR/gpu_check.json`` (and the table as
``DIR/gpu_check.txt``). Exits 2 without CUDA, 1 when a test fails, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TARGETS = {"mfu": 0.45, "triton_speedup": 3.0, "unpad_speedup": 1.12}
GPU_TESTS = ["tests/test_gpu.py", "tests/test_tacl_triton.py"]


def versions() -> dict[str, str]:
    import importlib.metadata as metadata

    out = {"python": platform.python_version()}
    for name in ("torch", "triton", "transformers", "deepspeed", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def run_tests(results: Path, bundle: Path) -> dict:
    report = results / "gpu_tests.xml"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *GPU_TESTS,
                           f"--junitxml={report}"], cwd=ROOT, env=dict(os.environ, GPU_BUNDLE=str(bundle)),
                          capture_output=True, text=True)
    (results / "gpu_tests.log").write_text(proc.stdout + proc.stderr)
    summary = {"seconds": round(time.monotonic() - started, 1), "returncode": proc.returncode,
               "tail": proc.stdout[-1500:]}
    if report.is_file():
        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
        summary.update(counts)
        summary["failed_tests"] = [f"{case.get('classname')}::{case.get('name')}" for case in suite.iter("testcase")
                                   if case.find("failure") is not None or case.find("error") is not None]
    return summary


def loss_benchmark(iters: int) -> list[dict]:
    import torch
    from bench_tacl_loss import measure

    rows = []
    for dim in (768, 1024):
        ref_ms, ref_mem = measure("torch", 32, 256, dim, torch.float16, iters)
        tri_ms, tri_mem = measure("triton", 32, 256, dim, torch.float16, iters)
        rows.append({"dim": dim, "torch_ms": ref_ms, "triton_ms": tri_ms, "speedup": ref_ms / tri_ms,
                     "torch_extra_mib": ref_mem, "triton_extra_mib": tri_mem})
    return rows


def table(report: dict) -> str:
    lines = [f"# tacl-scale GPU check: {report['device']}",
             "versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()),
             f"measured dense bf16 peak: {report['peak_tflops']:.0f} TFLOP/s", ""]
    tests = report.get("tests", {})
    if tests:
        lines += ["| tests | passed | failed | errors | skipped | seconds |", "|---|---|---|---|---|---|",
                  f"| {' '.join(GPU_TESTS)} | {tests.get('passed', '?')} | {tests.get('failures', '?')} | "
                  f"{tests.get('errors', '?')} | {tests.get('skipped', '?')} | {tests['seconds']} |", ""]
        for name in tests.get("failed_tests", []):
            lines.append(f"FAILED {name}")
    if report.get("tacl_loss"):
        lines += ["| TaCL loss B=32 L=256 fp16 | torch ms | triton ms | speed-up | torch extra MiB | triton extra MiB |",
                  "|---|---|---|---|---|---|"]
        for r in report["tacl_loss"]:
            lines.append(f"| D={r['dim']} | {r['torch_ms']:.3f} | {r['triton_ms']:.3f} | {r['speedup']:.2f}x | "
                         f"{r['torch_extra_mib']:.1f} | {r['triton_extra_mib']:.1f} |")
        lines.append("")
    if report.get("training"):
        lines += ["| BERT-base TaCL, L=256, bf16, batch 256 | micro | step ms | tokens/s | MFU | student MFU | "
                  "teacher MFU | teacher share | peak GiB |", "|---|---|---|---|---|---|---|---|---|"]
        for r in report["training"]:
            name = "unpadded" if r["unpad"] else "padded"
            if "error" in r:
                lines.append(f"| {name} | {r['micro_batch']} | {r['error']} | | | | | | |")
                continue
            lines.append(f"| {name} | {r['micro_batch']} | {r['step_ms']:.0f} | {r['tokens_per_s']:,.0f} | "
                         f"{r['mfu']:.1%} | {r['mfu_student']:.1%} | {r['mfu_teacher']:.1%} | "
                         f"{r['teacher_share']:.1%} | {r['peak_mem_gib']:.1f} |")
        lines.append("")
    if report.get("targets"):
        lines += ["| target | wanted | measured | met |", "|---|---|---|---|"]
        for name, t in report["targets"].items():
            lines.append(f"| {name} | {t['wanted']} | {t['measured']} | {'yes' if t['met'] else 'NO'} |")
    for name, error in report.get("errors", {}).items():
        lines.append(f"{name} failed: {error}")
    return "\n".join(lines)


def targets(report: dict) -> dict:
    from bench_train_gpu import best

    out = {}
    training = report.get("training") or []
    padded, unpadded = best(training, False), best(training, True)
    if unpadded:
        out["TaCL-base end-to-end MFU"] = {"wanted": f">= {TARGETS['mfu']:.0%}", "measured": f"{unpadded['mfu']:.1%}",
                                           "met": unpadded["mfu"] >= TARGETS["mfu"]}
    if padded and unpadded:
        ratio = unpadded["tokens_per_s"] / padded["tokens_per_s"]
        out["unpadded / padded tokens/s"] = {"wanted": f">= {TARGETS['unpad_speedup']}x", "measured": f"{ratio:.2f}x",
                                             "met": ratio >= TARGETS["unpad_speedup"]}
    for r in report.get("tacl_loss") or []:
        out[f"Triton / torch TaCL loss D={r['dim']}"] = {
            "wanted": f">= {TARGETS['triton_speedup']}x", "measured": f"{r['speedup']:.2f}x",
            "met": r["speedup"] >= TARGETS["triton_speedup"]}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", type=Path, default=ROOT / ".gpu_bundle")
    p.add_argument("--results", type=Path, default=Path(os.environ.get("OUT") or ROOT / "runs" / "gpu_check"))
    p.add_argument("--quick", action="store_true", help="fewer steps and micro-batch sizes (a smoke run)")
    p.add_argument("--skip-tests", action="store_true")
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: scripts/gpu_check.sh runs the GPU tests and benchmarks; run it on a GPU machine",
              file=sys.stderr)
        return 2
    info = json.loads((args.bundle / "bundle.json").read_text())
    data = args.bundle / info["dataset"]
    args.results.mkdir(parents=True, exist_ok=True)
    from bench_train_gpu import measure_peak_tflops, sweep

    report: dict = {"device": torch.cuda.get_device_name(), "versions": versions(),
                    "peak_tflops": measure_peak_tflops(), "errors": {}}
    phases = [
        ("tests", lambda: None if args.skip_tests else run_tests(args.results, args.bundle)),
        ("tacl_loss", lambda: loss_benchmark(10 if args.quick else 50)),
        ("training", lambda: sweep(data, [64] if args.quick else [32, 64, 128], 3 if args.quick else 8,
                                   2 if args.quick else 3, report["peak_tflops"])),
    ]
    for name, phase in phases:
        started = time.monotonic()
        try:
            report[name] = phase()
        except Exception as err:  # one broken phase must not hide the others' figures
            report["errors"][name] = f"{type(err).__name__}: {err}"[:500]
        print(f"[{name}: {time.monotonic() - started:.0f} s]", flush=True)
    report["targets"] = targets(report)
    text = table(report)
    print(text)
    (args.results / "gpu_check.txt").write_text(text + "\n")
    (args.results / "gpu_check.json").write_text(json.dumps(report, indent=2))
    tests = report.get("tests") or {}
    return 1 if report["errors"] or tests.get("returncode", 0) != 0 else 0


if __name__ == "__main__":
    sys.exit(main())

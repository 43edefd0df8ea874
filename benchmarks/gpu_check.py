"""Every GPU test and benchmark of tacl-scale in one run; ``scripts/gpu_check.sh``
calls it once the offline install is done.

    python benchmarks/gpu_check.py --bundle .gpu_bundle --results DIR [--quick] [--budget PHASE=SECONDS]

Phases, each in a process of its own with its own time budget (seconds, default
run / ``--quick``):

1. ``env`` (10 / 10): GPU, compute capability, versions, the datasheet peak MFU is
   taken against, a measured bf16 matmul rate (for reference only);
2. ``tests`` (130 / 45): the CUDA tests under pytest (each test at most 60 s);
3. ``tacl_loss`` (20 / 15): the fused Triton TaCL loss against the PyTorch
   reference, forward + backward ms and peak extra MiB, B=32, L=256, D=768/1024;
4. ``training`` (140 / 50): BERT-base TaCL training steps at length 256, global
   batch 256 (``bench_train_gpu.py``): docs/training.md's command as typed
   (``--ds ds_configs/zero2.json``, micro-batch and precision "auto"), Hugging
   Face's ``BertForPreTraining`` doing MLM + NSP alone on the same batches
   (compiled, and eager), ZeRO-1 and ZeRO-2 unpadded at micro-batches 256 and 32,
   ZeRO-2 padded at 256, then ZeRO-1 and ZeRO-2 with ``--cuda-graphs`` at 32; a row
   per configuration as soon as it is measured.

``gpu_check.sh`` runs the install first (60 s), so a default run ends within 6
minutes and ``--quick`` within 3, whatever hangs: a phase may use what the phases
before it left of their budgets, never past that deadline (less the 10 s its stop
may take). A phase that runs past its time is stopped and recorded as ``timeout``
and the next one runs; what it measured
before (tests finished, training rows) is kept. After every phase the report is
written again: ``DIR/gpu_check.json``, ``DIR/gpu_check.txt`` (the table), and each
phase's ``DIR/<phase>.log``. ``--dry-run`` runs the same phases on the CPU at tiny
shapes (a check of this script, not figures). Exits 2 without CUDA (unless
``--dry-run``), 1 when a phase did not pass, else 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tacl_scale.files import atomic_write  # noqa: E402

PHASES = ("env", "tests", "tacl_loss", "training")
# A fresh machine compiles everything once: the tests' small BERT, then BERT-base in
# the training phase (about a minute); --budget training=300 for the whole sweep.
BUDGETS = {"env": 10, "tests": 130, "tacl_loss": 20, "training": 140}
QUICK_BUDGETS = {"env": 10, "tests": 45, "tacl_loss": 15, "training": 50}
INSTALL_BUDGET = 60  # gpu_check.sh's, recorded in install.json (25–30 s on a fresh H200 machine)
# stop_group's waits after a phase's time (SIGTERM, then SIGKILL: 5 s each), kept
# inside the run's deadline.
STOP_GRACE = 10
TEST_TIMEOUT = 60  # seconds per test
# The kernel tests first: they compile in seconds, where test_gpu.py's several cold
# torch.compile runs can use up a cold machine's budget (28 of 35 passed in 100 s once).
GPU_TESTS = ["tests/test_tacl_triton.py", "tests/test_gpu.py"]
TARGETS = {"mfu": 0.45, "mfu_micro_32": 0.35, "triton_speedup": 3.0, "unpad_speedup": 1.12, "vs_hf_compiled": 1.0,
           "readme_vs_best": 0.9}


# -- phases (each runs in its own process: python gpu_check.py --phase NAME) ---------------------------------

def phase_env(args: argparse.Namespace) -> dict:
    import importlib.metadata as metadata

    import torch

    from tacl_scale.flops import peak_flops

    versions = {"python": platform.python_version()}
    for name in ("torch", "triton", "transformers", "deepspeed", "numpy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    if args.dry_run:
        return {"device": "cpu (dry run)", "versions": versions, "datasheet_tflops": None, "matmul_tflops": None}
    from bench_train_gpu import measure_matmul_tflops

    name = torch.cuda.get_device_name()
    major, minor = torch.cuda.get_device_capability()
    datasheet = peak_flops(name)
    return {"device": f"{name} (sm_{major}{minor})", "versions": versions,
            "datasheet_tflops": datasheet / 1e12 if datasheet else None, "matmul_tflops": measure_matmul_tflops()}


def phase_tests(args: argparse.Namespace) -> dict:
    report = args.results / "tests.xml"
    selection = ["-k", "zero_student_row or no_host_synchronisation"] if args.dry_run else []
    if args.quick and not args.dry_run:
        # The quick run leaves out what compiles (tens of seconds each on a fresh machine).
        selection = ["-k", "not resume and not zero2.json and not compiled_training and not micro_batch_never_waits "
                           "and not cuda_graph_replays"]
    # -v: one line per test as it ends, into this phase's log, which the parent
    # reads if the phase runs out of time before pytest writes its report.
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", f"--timeout={TEST_TIMEOUT}",
               *GPU_TESTS, *selection, f"--junitxml={report}"]
    started = time.monotonic()
    sys.stdout.flush()
    proc = subprocess.run(command, cwd=ROOT, env=dict(os.environ, GPU_BUNDLE=str(args.bundle)))
    summary: dict = {"command": " ".join(command[2:]), "seconds": round(time.monotonic() - started, 1),
                     "returncode": proc.returncode}
    if report.is_file():
        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
        summary.update(counts)
        summary["failed_tests"] = [f"{case.get('classname')}::{case.get('name')}" for case in suite.iter("testcase")
                                   if case.find("failure") is not None or case.find("error") is not None]
    if proc.returncode != 0:
        raise PhaseFailed(summary, f"pytest exited {proc.returncode}")
    return summary


def phase_tacl_loss(args: argparse.Namespace) -> list[dict]:
    import torch
    from bench_tacl_loss import measure

    if args.dry_run:
        shapes, iters, device = [(2, 32, 64)], 1, "cpu"
    else:
        shapes, iters, device = [(32, 256, 768), (32, 256, 1024)], 10 if args.quick else 50, "cuda"
    rows = []
    for batch, length, dim in shapes:
        dtype = torch.float16 if device == "cuda" else torch.float32
        ref_ms, ref_mem = measure("torch", batch, length, dim, dtype, iters, device)
        tri_ms, tri_mem = measure("triton", batch, length, dim, dtype, iters, device)
        rows.append({"batch": batch, "length": length, "dim": dim, "torch_ms": ref_ms, "triton_ms": tri_ms,
                     "speedup": ref_ms / tri_ms, "torch_extra_mib": ref_mem, "triton_extra_mib": tri_mem})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def phase_training(args: argparse.Namespace) -> list[dict]:
    from bench_train_gpu import TINY_BERT, dry_run_setups, sweep, sweep_setups

    data = args.bundle / json.loads((args.bundle / "bundle.json").read_text())["dataset"]
    out = args.results / "training.jsonl"
    if args.dry_run:
        return sweep(data, dry_run_setups(), 1, 1, out, TINY_BERT, workers=0)
    if args.quick:  # the README's command, the compiled peer, ZeRO-1 and ZeRO-2 at 256
        return sweep(data, sweep_setups([256])[:4], 2, 2, out)
    return sweep(data, sweep_setups([256, 32]), 6, 2, out)


class PhaseFailed(Exception):
    """A phase ran to its end without passing; ``data`` is what it measured."""

    def __init__(self, data: object, reason: str) -> None:
        super().__init__(reason)
        self.data = data


def run_phase_here(args: argparse.Namespace) -> int:
    """The child's side: run one phase, write ``<phase>.json`` (status and data)."""
    phase = {"env": phase_env, "tests": phase_tests, "tacl_loss": phase_tacl_loss, "training": phase_training}
    try:
        result = {"status": "passed", "data": phase[args.phase](args)}
    except PhaseFailed as err:
        result = {"status": "failed", "data": err.data, "error": str(err)}
    except Exception as err:  # recorded, not raised: the parent reads the file
        result = {"status": "failed", "error": f"{type(err).__name__}: {err}"[:1000]}
    write_json(args.results / f"{args.phase}.json", result)
    return 0 if result["status"] == "passed" else 1


# -- the parent: phases in turn, each under its budget, the report after each ---------------------------------

def run_phase(args: argparse.Namespace, name: str, budget: float) -> dict:
    """Run phase ``name`` in a child process for at most ``budget`` seconds (then
    its whole process group is stopped) and return what it recorded."""
    results = args.results
    (results / f"{name}.json").unlink(missing_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--phase", name, "--bundle", str(args.bundle),
               "--results", str(results)] + (["--quick"] if args.quick else []) + (["--dry-run"] if args.dry_run else [])
    # The dry run's kernels run in Triton's interpreter and DeepSpeed on its CPU accelerator.
    env = dict(os.environ, TRITON_INTERPRET="1", DS_ACCELERATOR="cpu") if args.dry_run else None
    started = time.monotonic()
    with open(results / f"{name}.log", "w", encoding="utf-8") as log:
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            child.wait(timeout=budget)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_group(child)
    seconds = round(time.monotonic() - started, 1)
    recorded = results / f"{name}.json"
    if recorded.is_file():
        result = json.loads(recorded.read_text(encoding="utf-8"))
    elif timed_out:
        result = {"status": "timeout", "error": f"stopped after its budget of {budget:g} s"}
    else:
        result = {"status": "failed", "error": f"exited {child.returncode} without a result (see {name}.log)"}
    if name == "training" and "data" not in result:  # the rows measured before it stopped
        rows = results / "training.jsonl"
        if rows.is_file():
            result["data"] = [json.loads(line) for line in rows.read_text(encoding="utf-8").splitlines() if line]
    if name == "tests" and "data" not in result:  # the tests that ended before it stopped
        result["data"] = tests_from_log(results / f"{name}.log")
    result.update(seconds=seconds, budget=budget)
    return result


def tests_from_log(log: Path) -> dict:
    """Counts of the tests a ``pytest -v`` log shows as ended (PASSED, FAILED,
    ERROR, SKIPPED lines), for a run stopped before its junit report."""
    outcomes = {"PASSED": "passed", "FAILED": "failures", "ERROR": "errors", "SKIPPED": "skipped"}
    counts = dict.fromkeys(outcomes.values(), 0)
    failed = []
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    for line in text.splitlines():
        match = re.match(r"^(tests/\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED)\b", line)
        if match:
            counts[outcomes[match.group(2)]] += 1
            if match.group(2) in ("FAILED", "ERROR"):
                failed.append(match.group(1))
    return {**counts, "tests": sum(counts.values()), "seconds": None, "failed_tests": failed,
            "note": "stopped before the end: counts from the log"}


def stop_group(child: subprocess.Popen) -> None:
    """SIGTERM to the phase's process group, SIGKILL if it is still there 5 s later."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def write_json(path: Path, value: object) -> None:
    """Write-then-rename: a reader (or a run killed now) never sees half a file."""
    atomic_write(path, json.dumps(value, indent=2))


def targets(report: dict) -> dict:
    """Each target of the issue against this run's rows, named with the rows compared."""
    from bench_train_gpu import best, judged, peer, readme_row

    out = {}
    training = (report["phases"].get("training") or {}).get("data") or []

    def target(name: str, wanted: str, measured: float, goal: float, percent: bool = False) -> None:
        out[name] = {"wanted": wanted, "measured": f"{measured:.1%}" if percent else f"{measured:.2f}x",
                     "met": measured >= goal}

    for micro, goal in ((256, TARGETS["mfu"]), (32, TARGETS["mfu_micro_32"])):
        for ds_config, zero in (("zero1_bf16.json", "ZeRO-1"), ("zero2_bf16.json", "ZeRO-2")):
            row = best(training, True, ds_config, micro)
            if row is not None and row.get("mfu") is not None:
                target(f"TaCL-base MFU, {zero} unpadded micro {micro}", f">= {goal:.0%}", row["mfu"], goal, True)
    measured = [r for r in training if judged(r) and r.get("mfu") is not None and not r.get("peer")]
    if measured:  # the best configuration the sweep found, named
        top = max(measured, key=lambda r: r["mfu"])
        target(f"TaCL-base end-to-end MFU (best: {top['name']})", f">= {TARGETS['mfu']:.0%}", top["mfu"],
               TARGETS["mfu"], True)
    fastest, hf = best(training, ds_config=None), peer(training)
    if fastest and hf:
        target(f"TaCL tokens/s / compiled HF MLM+NSP ({fastest['name']})", f">= {TARGETS['vs_hf_compiled']}x",
               fastest["tokens_per_s"] / hf["tokens_per_s"], TARGETS["vs_hf_compiled"])
    readme = readme_row(training)
    if fastest and readme:
        target("README command / best configuration", f">= {TARGETS['readme_vs_best']}x",
               readme["tokens_per_s"] / fastest["tokens_per_s"], TARGETS["readme_vs_best"])
    padded, unpadded = best(training, False), best(training, True)
    if padded and unpadded:
        target("unpadded / padded tokens/s", f">= {TARGETS['unpad_speedup']}x",
               unpadded["tokens_per_s"] / padded["tokens_per_s"], TARGETS["unpad_speedup"])
    for r in (report["phases"].get("tacl_loss") or {}).get("data") or []:
        target(f"Triton / torch TaCL loss fwd+bwd D={r['dim']}", f">= {TARGETS['triton_speedup']}x", r["speedup"],
               TARGETS["triton_speedup"])
    shares = [r["tacl_loss_share"] for r in training if judged(r) and r.get("tacl_loss_share")]
    if shares:  # the alternative: a loss under 1% of the step is off the critical path
        out["TaCL loss share of a step (largest of the sweep)"] = {
            "wanted": "< 1% (else Triton >= 3x)", "measured": f"{max(shares):.1%}", "met": max(shares) < 0.01}
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def table(report: dict) -> str:
    phases = report["phases"]
    env = (phases.get("env") or {}).get("data") or {}
    lines = [f"# tacl-scale GPU check: {env.get('device', '?')} ({report['mode']} run)"]
    if env.get("versions"):
        lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()))
    if env.get("datasheet_tflops") or env.get("matmul_tflops"):
        datasheet = env.get("datasheet_tflops")
        lines.append(f"MFU = model FLOPs / (time x datasheet dense bf16 peak, "
                     f"{'unknown for this GPU' if not datasheet else f'{datasheet:.0f} TFLOP/s'}); "
                     f"a measured 8192^3 bf16 matmul: {env.get('matmul_tflops') or 0:.0f} TFLOP/s (reference only)")
    lines += ["", "| phase | status | seconds | budget |", "|---|---|---|---|"]
    for name in ("install", *PHASES):
        if name in phases:
            p = phases[name]
            lines.append(f"| {name} | {p['status']} | {p.get('seconds', '')} | {p.get('budget', '')} |")
    for name, p in phases.items():
        if p.get("error"):
            lines.append(f"{name}: {p['error']}")
    tests = (phases.get("tests") or {}).get("data") or {}
    if "tests" in tests:
        lines += ["", "| tests | passed | failed | errors | skipped | seconds |", "|---|---|---|---|---|---|",
                  f"| {' '.join(GPU_TESTS)} | {tests['passed']} | {tests['failures']} | {tests['errors']} | "
                  f"{tests['skipped']} | {tests['seconds']} |"]
        lines += [f"FAILED {name}" for name in tests.get("failed_tests", [])]
    loss = (phases.get("tacl_loss") or {}).get("data") or []
    if loss:
        lines += ["", "| TaCL loss fwd+bwd, 15% masked | torch ms | triton ms | speed-up | torch extra MiB | "
                  "triton extra MiB |", "|---|---|---|---|---|---|"]
        for r in loss:
            mem = (f"{r['torch_extra_mib']:.1f} | {r['triton_extra_mib']:.1f}"
                   if r["torch_extra_mib"] is not None else "n/a | n/a")
            lines.append(f"| B={r['batch']} L={r['length']} D={r['dim']} | {r['torch_ms']:.3f} | "
                         f"{r['triton_ms']:.3f} | {r['speedup']:.2f}x | {mem} |")
    training = (phases.get("training") or {}).get("data") or []
    if training:
        shape = "dry run: tiny model, batch 4" if report["mode"] == "dry" else "BERT-base, L=256, bf16, batch 256"
        lines += ["", f"| training step, {shape} | micro × accumulation | step ms | tokens/s | MFU | student MFU | "
                  "teacher MFU | teacher share | TaCL loss share | peak GiB |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in training:
            if "error" in r:  # its first line: a cell of the table (all of it in gpu_check.json)
                error = (r["error"].splitlines() or [""])[0].replace("|", "/")
                lines.append(f"| {r['name']} | | {error} | | | | | | | |")
                continue
            peak = "n/a" if r["peak_mem_gib"] is None else f"{r['peak_mem_gib']:.1f}"
            shape_used = f"{r.get('micro_batch')} × {r.get('accumulation')}"
            recorded = r.get("graphs_recorded_while_timed")
            name = r["name"] + (f" ({recorded} graphs recorded while timed)" if recorded else "")
            lines.append(f"| {name} | {shape_used} | {r['step_ms']:.0f} | {r['tokens_per_s']:,.0f} | "
                         f"{_pct(r['mfu'])} | "
                         f"{_pct(r['mfu_student'])} | {_pct(r['mfu_teacher'])} | {r['teacher_share']:.1%} | "
                         f"{r.get('tacl_loss_share', 0.0):.1%} | {peak} |")
    goals = targets(report) if report["mode"] != "dry" else {}
    if goals:
        lines += ["", "| target | wanted | measured | met |", "|---|---|---|---|"]
        lines += [f"| {k} | {t['wanted']} | {t['measured']} | {'yes' if t['met'] else 'NO'} |" for k, t in goals.items()]
    return "\n".join(lines)


def write_report(report: dict) -> str:
    text = table(report)
    results = report["results"]
    write_json(Path(results) / "gpu_check.json", {**report, "targets": targets(report)})
    atomic_write(Path(results) / "gpu_check.txt", text + "\n")
    return text


def parse_budgets(values: list[str], quick: bool) -> dict[str, float]:
    budgets = dict(QUICK_BUDGETS if quick else BUDGETS)
    for value in values:
        name, _, seconds = value.partition("=")
        if name not in budgets or not seconds:
            raise SystemExit(f"error: --budget {value}: expected PHASE=SECONDS with PHASE one of {', '.join(PHASES)}")
        try:
            budgets[name] = float(seconds)
        except ValueError:
            budgets[name] = math.nan
        if not (math.isfinite(budgets[name]) and budgets[name] > 0):
            raise SystemExit(f"error: --budget {value}: SECONDS must be a number > 0")
    return budgets


class PhaseClock:
    """Each phase's time: its budget plus what the phases before it left unused,
    never past the run's deadline (less the time a phase's stop may take), so the
    whole run ends by it whatever hangs."""

    def __init__(self, budgets: dict[str, float], deadline: float, now: Callable[[], float] = time.monotonic) -> None:
        self.budgets, self.deadline, self.now = budgets, deadline, now
        self.unused = 0.0

    def allow(self, name: str) -> float:
        """The seconds phase ``name`` may run now (0: none left)."""
        return max(0.0, min(self.budgets[name] + self.unused, self.deadline - self.now() - STOP_GRACE))

    def spent(self, allowed: float, seconds: float) -> None:
        """A phase allowed ``allowed`` seconds ended after ``seconds``."""
        self.unused = max(0.0, allowed - seconds)


def run_deadline(budgets: dict[str, float], started: float | None) -> float:
    """The run's deadline on ``time.monotonic()``'s clock: the install's budget and
    the phases' from ``started`` (seconds since the epoch, when gpu_check.sh began
    the install), or the phases' from now when this script runs alone."""
    total = sum(budgets.values())
    if started is None:
        return time.monotonic() + total
    return time.monotonic() + (started + INSTALL_BUDGET + total - time.time())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", type=Path, default=ROOT / ".gpu_bundle")
    p.add_argument("--results", type=Path, default=Path(os.environ.get("OUT") or ROOT / "runs" / "gpu_check"))
    p.add_argument("--quick", action="store_true", help="fewer steps and configurations: within 3 minutes")
    p.add_argument("--dry-run", action="store_true", help="every phase on the CPU at tiny shapes (checks this script)")
    p.add_argument("--budget", action="append", default=[], metavar="PHASE=SECONDS", help="override a phase's budget")
    p.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)  # internal: run one phase in this process
    # internal, from gpu_check.sh: when its install began (seconds since the epoch), and a check of the
    # arguments before that install
    p.add_argument("--started", type=float, default=None, help=argparse.SUPPRESS)
    p.add_argument("--check-args", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.results = args.results.resolve()
    args.bundle = args.bundle.resolve()
    if args.phase:
        return run_phase_here(args)
    budgets = parse_budgets(args.budget, args.quick)
    if args.check_args:
        return 0
    deadline = run_deadline(budgets, args.started)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: scripts/gpu_check.sh runs the GPU tests and benchmarks; run it on a GPU machine",
              file=sys.stderr)
        return 2
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "training.jsonl").unlink(missing_ok=True)
    mode = "dry" if args.dry_run else "quick" if args.quick else "default"
    report: dict = {"mode": mode, "results": str(args.results), "phases": {}}
    install = args.results / "install.json"
    if install.is_file():
        report["phases"]["install"] = json.loads(install.read_text(encoding="utf-8"))
    clock = PhaseClock(budgets, deadline)
    for name in PHASES:
        allowed = clock.allow(name)
        if allowed < 1:
            report["phases"][name] = {"status": "timeout", "error": "no time left before the run's deadline",
                                      "seconds": 0, "budget": 0}
        else:
            report["phases"][name] = run_phase(args, name, round(allowed, 1))
        clock.spent(allowed, report["phases"][name]["seconds"])
        write_report(report)
        print(f"[{name}: {report['phases'][name]['status']}, {report['phases'][name]['seconds']:.0f} s of "
              f"{allowed:.0f}]", flush=True)
    print(write_report(report))
    return 0 if all(p["status"] == "passed" for p in report["phases"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

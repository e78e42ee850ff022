"""Side by side with aiconfigurator 0.12 on the three serving questions of issue 33 (done-when).

aiconfigurator's answers are recorded data, not rerun: `surveys/engines/aiconfigurator_answers.csv`,
each value read from the lines of `surveys/engines/aiconfigurator.md` its `source_lines` names (the
exact `aiconfigurator cli default --backend auto --total-gpus N ...` commands, run offline on this
2-core box; wall = elapsed, CPU = user seconds of `/usr/bin/time -v`).

The mapping. aiconfigurator answers "the best deployment on N GPUs under TTFT/TPOT targets" and
reports the request rate that deployment serves. `plan serve` has no fixed GPU budget for serving;
it answers "the fewest GPUs that serve QPS requests/s under the targets". So each question is put to
it at aiconfigurator's request rate (`qps=` its req/s, same ISL/OSL/TTFT/TPOT, `--engine auto`),
with `plan.load=1` (aiconfigurator's rates are its steady state at full batch; our default 0.8
would add 25 % headroom that it does not) and `grid.ngpus` up to aiconfigurator's budget (a
replica no larger than its whole budget). Fewer GPUs than aiconfigurator means our model predicts
more throughput per GPU at the same targets; tokens/s/GPU here is that load (qps x OSL) over our
GPU count. DeepSeek-R1 is `model=deepseek-v3` (the same architecture) with fp8 weights, matmuls
and KV cache, as aiconfigurator models the R1 checkpoint; Q1-FP8 likewise on Llama-3.1-70B.

    python benchmarks/compare_aiconfigurator.py [--only Q2] [--csv out.csv]

Prints one table (ours next to aiconfigurator's per question); wall and CPU (user) seconds of our
whole `python -m parallmelism plan serve` process, timed here. Figures to read, never pass/fail.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AIC_ANSWERS = ROOT / "benchmarks" / "surveys" / "engines" / "aiconfigurator_answers.csv"

_FP8 = ["workload.weight_dtype=fp8", "workload.precision=fp8", "workload.kv_dtype=fp8"]
# question -> (our model/hardware/workload overrides, grid.ngpus), the load and limits come from the CSV
QUESTIONS: dict[str, tuple[list[str], list[int]]] = {
    "Q1": (["model=llama3.1-70b", "hardware=h200-sxm-141gb"], [1, 2, 4, 8, 16]),
    "Q1-FP8": (["model=llama3.1-70b", "hardware=h200-sxm-141gb", *_FP8], [1, 2, 4, 8, 16]),
    "Q2": (["model=llama3.1-8b", "hardware=h100-sxm-80gb"], [1, 2, 4, 8]),
    "Q3-16": (["model=deepseek-v3", "hardware=h200-sxm-141gb", *_FP8], [8, 16]),
    "Q3-32": (["model=deepseek-v3", "hardware=h200-sxm-141gb", *_FP8], [8, 16, 32]),
}
# the lengths and limits each question states (aiconfigurator.md "Commands")
LIMITS = {
    "Q1": dict(input_len=4000, output_len=500, ttft_ms=1000, tpot_ms=20),
    "Q1-FP8": dict(input_len=4000, output_len=500, ttft_ms=1000, tpot_ms=20),
    "Q2": dict(input_len=1024, output_len=256, ttft_ms=1000, tpot_ms=20),
    "Q3-16": dict(input_len=4000, output_len=1000, ttft_ms=2000, tpot_ms=30),
    "Q3-32": dict(input_len=4000, output_len=1000, ttft_ms=2000, tpot_ms=30),
}


def aic_answers() -> dict[str, dict[str, str]]:
    with AIC_ANSWERS.open(newline="") as f:
        return {row["question"]: row for row in csv.DictReader(f)}


def plan_args(question: str, aic: dict[str, str], out: Path) -> list[str]:
    """The `parallmelism` arguments that put `question` to `plan serve` (the mapping above)."""
    overrides, ngpus = QUESTIONS[question]
    lim = LIMITS[question]
    return [
        "plan",
        "serve",
        *overrides,
        f"grid.ngpus=[{','.join(map(str, ngpus))}]",
        f"qps={aic['requests_per_s']}",
        *(f"{k}={v}" for k, v in lim.items()),
        "plan.load=1",
        "--engine",
        "auto",
        "--out",
        str(out),
    ]


def _subprocess_run(args: list[str]) -> tuple[int, str, float, float]:
    """(exit code, stdout+stderr, wall s, user CPU s) of `python -m parallmelism ARGS`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), COLUMNS="200")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "parallmelism", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
    return p.returncode, p.stdout + p.stderr, wall, cpu


def _layout(r: dict[str, str], pre: str = "") -> str:
    """e.g. `tp4 ep8 (32 GPUs)`: the replica's dimensions above 1 (dp = attention data parallel)."""
    dims = [f"{d}{int(float(r[pre + d]))}" for d in ("tp", "pp", "sp", "dp", "ep") if int(float(r[pre + d] or 1)) > 1]
    n = int(float(r[pre + "replica_gpus"]))
    return f"{' '.join(dims) or 'tp1'} ({n} GPU{'s' if n > 1 else ''})"


def our_answer(question: str, aic: dict[str, str], run=_subprocess_run) -> dict[str, object]:
    """Our answer to `question` as a row of the table; `run(args) -> (rc, output, wall_s, cpu_s)`.
    A refusal (exit code 2) is the row's `refusal` sentence."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "plan.csv"
        rc, text, wall, cpu = run(plan_args(question, aic, out))
        if rc != 0:
            lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
            return dict(refusal=lines[-1] if lines else f"exit code {rc}", wall_s=wall, cpu_s=cpu)
        with out.open(newline="") as f:
            rows = list(csv.DictReader(f))
    rec = next((r for r in rows if r["recommended"] == "true"), None) or next(r for r in rows if r["chosen"] == "true")
    picked = re.search(r"the plan below is (\w+)'s", text)
    tie = re.search(r"cheapest ([\w =]+?)(?: \(tie\))?, fastest", text)
    engine = picked.group(1) if picked else "?"
    if tie and "=" in tie.group(1):
        engine += f" (tie: {tie.group(1).replace(' = ', '=')})"
    gpus = int(float(rec["total_gpus"]))
    if rec["deployment"] == "disaggregated":
        layout = (
            f"P {rec['prefill_replicas']} x {_layout(rec, 'prefill_')} + "
            f"D {rec['decode_replicas']} x {_layout(rec, 'decode_')} batch {rec['decode_batch']}"
        )
        split = f"{rec['prefill_gpus']}:{rec['decode_gpus']}"
    else:
        layout, split = f"{rec['replicas']} x {_layout(rec)} batch {rec['batch']}", ""
    qps = float(rec["qps"])
    return dict(
        total_gpus=gpus,
        deployment=rec["deployment"],
        pd_split=split,
        layout=layout,
        engine=engine,
        ttft_ms=float(rec["ttft_ms"]),
        itl_ms=float(rec["tpot_ms"]),
        tokens_per_s_per_gpu=qps * LIMITS[question]["output_len"] / gpus,
        wall_s=wall,
        cpu_s=cpu,
    )


COLUMNS = ["question", "tool", "total_gpus", "deployment", "pd_split", "layout", "engine", "ttft_ms", "itl_ms"]
COLUMNS += ["tokens_per_s_per_gpu", "wall_s", "cpu_s"]


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.2f}"
    return str(v)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=list(QUESTIONS), help="question(s) to run (default: all)")
    ap.add_argument("--csv", type=Path, help="also write the table here")
    a = ap.parse_args(argv)
    aic = aic_answers()
    rows: list[dict[str, object]] = []
    for q in a.only or list(QUESTIONS):
        ours = our_answer(q, aic[q])
        theirs = {k: aic[q][k] for k in COLUMNS[2:]}
        theirs.update({k: float(aic[q][k]) for k in ("ttft_ms", "itl_ms", "tokens_per_s_per_gpu", "wall_s", "cpu_s")})
        if "refusal" in ours:
            ours = dict(ours, deployment=f"refused: {ours.pop('refusal')}")
        rows.append({"question": q, "tool": "parallmelism", **ours})
        rows.append({"question": q, "tool": "aiconfigurator 0.12", **theirs})
    table = [[_fmt(r.get(c, "")) for c in COLUMNS] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(COLUMNS)]
    print("| " + " | ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for t in table:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(t, widths)) + " |")
    if a.csv:
        with a.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows({c: r.get(c, "") for c in COLUMNS} for r in rows)


if __name__ == "__main__":
    main()

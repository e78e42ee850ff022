"""What Megatron-Core's combined 1F1B schedule (the EP A2A overlap, `overlap_moe_expert_parallel_comm`) does to
an interleaved pipeline's P2P hops, by event simulation of its schedule (issue 32, the Qwen3-30B-A3B PP 2 x VP 12
row). Prints figures, asserts nothing; nothing here feeds the cost model.

    python benchmarks/combined_1f1b_hops.py

The schedule, as Megatron-Core core_v0.15.0 pipeline_parallel/schedules.py orders it on pipeline rank r of p
with v model chunks and m micro-batches in groups of g = microbatch_group_size_per_vp_stage (default p):
virtual micro-batch k runs chunk (k // g) % v of micro-batch (k // (g v)) g + k % g forward, chunk v - 1 - that
backward (get_schedule_table); rank r runs W_r = 2 (p - r - 1) + (v - 1) g forwards first (get_pp_rank_microbatches,
+1 "to ensure the forward and backward computations are independent in all 1f1b steps" under the A2A overlap),
then pairs forward k + W_r with backward k, then the remaining backwards. Conventional interleaving runs each
pair's forward, then its backward; the combined schedule runs the pair as one merged step
(combined_1f1b_schedule_for_interleaved_pipelining: the layers of the two interleaved on two streams), so the
merged step starts when both its inputs are there and ends both outputs together. Dependencies: a chunk's
forward on rank r needs rank r - 1's (rank 0: rank p - 1's previous chunk), its backward rank r + 1's (rank
p - 1: rank 0's next chunk; the last chunk its own forward). Each rank runs its steps in order; an input from
another rank arrives one hop after it is produced.

Findings: without the +1 the merged schedule deadlocks (the comment's reason); with it, conventional interleaving
exposes about the warm-up and cool-down chain's hops (the model's fill_drain, 2 (p - 1) v hops a step), and the
combined schedule about one hop more per merged step (1.03 hops a step at p 2, v 12, m 64 against 0.06; 1.14
against 0.24 at p 8, v 4, m 64): a zero-slack dependency between neighbouring ranks' merged steps. The cost model
hides every steady-state P2P hop (cost/pipeline.py pp_times_s). For the shipped megatron-te rows with the A2A
overlap and a pipeline the simulation's combined-minus-conventional exposure, at the model's own hop
(comm.pp_hop_s, from time_comm_pp_s = 2 m v hop) and merged step (the stage's non-bubble time over m v, forward
one third), is printed with what it would do to each row: about a point, in the direction four of the five
rows' errors need (not the mb2604p1 235B row's, +2.3 %), far from the 30B row's 44 %. Not applied.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TRAINING_CASE_FILES = ("training_measured.csv", "training_stacks.csv", "training_long_context_moe.csv")


def rank_steps(
    p: int, v: int, m: int, r: int, g: int, combined: bool, plus_one: bool = True
) -> list[list[tuple[str, int, int]]]:
    """Rank r's steps in order, each a list of (pass, micro-batch, chunk): one op, or a forward and a backward
    run as one merged step (combined) or one after the other (conventional). plus_one: the combined schedule's
    extra warm-up forward (False shows why it is there)."""
    total = m * v
    warmup = min(2 * (p - r - 1) + (v - 1) * g + (1 if combined and plus_one else 0), total)

    def mb_chunk(k: int, forward: bool) -> tuple[int, int]:
        chunk = (k // g) % v
        return (k // (g * v)) * g + k % g, chunk if forward else v - 1 - chunk

    steps = [[("F", *mb_chunk(k, True))] for k in range(warmup)]
    steps += [[("F", *mb_chunk(k + warmup, True)), ("B", *mb_chunk(k, False))] for k in range(total - warmup)]
    steps += [[("B", *mb_chunk(k, False))] for k in range(total - warmup, total)]
    return steps


def inputs(op: tuple[str, int, int], r: int, p: int, v: int) -> list[tuple[tuple[str, int, int], int]]:
    """The (op, rank) whose output `op` on rank r waits for (module docstring)."""
    kind, mb, c = op
    if kind == "F":
        if r > 0:
            return [(("F", mb, c), r - 1)]
        return [(("F", mb, c - 1), p - 1)] if c > 0 else []
    if r < p - 1:
        return [(("B", mb, c), r + 1)]
    return [(("B", mb, c + 1), 0)] if c < v - 1 else [(("F", mb, c), r)]


def simulate(
    p: int, v: int, m: int, fwd_s: float, bwd_s: float, hop_s: float, combined: bool, plus_one: bool = True
) -> float:
    """Seconds until every rank has run its steps: ops of fwd_s / bwd_s, inputs from another rank one hop late.
    Raises RuntimeError on a deadlock (no rank can start its next op)."""
    plans = [rank_steps(p, v, m, r, p, combined, plus_one) for r in range(p)]
    done: dict = {}
    nxt, free = [0] * p, [0.0] * p

    def ready(op, r):
        deps = inputs(op, r, p, v)
        if any(d not in done for d in deps):
            return None
        return max((done[d] + (hop_s if d[1] != r else 0.0) for d in deps), default=0.0)

    moved = True
    while moved:
        moved = False
        for r in range(p):
            while nxt[r] < len(plans[r]):
                step = [op for op in plans[r][nxt[r]] if (op, r) not in done]
                merged = combined and len(step) == 2
                todo = step if merged else step[:1]
                starts = [ready(op, r) for op in todo]
                if any(s is None for s in starts):
                    break
                end = max([free[r], *starts]) + sum(fwd_s if op[0] == "F" else bwd_s for op in todo)
                for op in todo:
                    done[(op, r)] = end
                free[r], moved = end, True
                if len(todo) == len(step):
                    nxt[r] += 1
    if nxt != [len(plan) for plan in plans]:
        raise RuntimeError("deadlock")
    return max(free)


def exposed_hops_per_step(p: int, v: int, m: int, hop_over_fwd: float = 0.1) -> tuple[float, float]:
    """(combined, conventional) extra time per merged step in hops, at a hop of `hop_over_fwd` forward chunks."""
    out = []
    for combined in (True, False):
        base = simulate(p, v, m, 1.0, 2.0, 0.0, combined)
        out.append((simulate(p, v, m, 1.0, 2.0, hop_over_fwd, combined) - base) / (hop_over_fwd * m * v))
    return out[0], out[1]


def shipped_rows():
    """(case, measured s, predicted s, p, v, m, hop s, merged step s) of the megatron-te rows with the A2A overlap
    and a pipeline."""
    from importlib import resources

    import pandas as pd

    from parallmelism.validate.cases import evaluate_one
    from parallmelism.validate.runner import _context
    from parallmelism.validate.steptime import step_time_run_of

    ctx = _context([], None)
    for name in TRAINING_CASE_FILES:
        path = resources.files("parallmelism") / "cases" / name
        df = pd.read_csv(str(path), dtype=str, keep_default_na=False).replace({"": None})
        for row in df.to_dict("records"):
            if (row.get("stack") or "megatron-te") != "megatron-te" or row.get("overlap_ep_comm") != "true":
                continue
            if int(row["pp"]) < 2 or row.get("step_time_s") is None:
                continue
            out = evaluate_one(step_time_run_of(row, ctx))
            p, v = int(row["pp"]), int(out["vpp"])
            m = int(row["global_batch"]) // (int(out["micro_batch"]) * int(row["dp"]))
            hop = float(out["time_comm_pp_s"]) / (2 * m * v)
            merged = (float(out["time_step_s"]) - float(out["time_bubble_s"])) / (m * v)
            yield row["case"], float(row["step_time_s"]), float(out["time_step_s"]), p, v, m, hop, merged


def main() -> int:
    print("p,v,m,combined_hops_per_merged_step,conventional_hops_per_step")
    for p, v, m in ((2, 12, 64), (8, 4, 16), (8, 4, 64), (4, 4, 32)):
        combined, conventional = exposed_hops_per_step(p, v, m)
        print(f"{p},{v},{m},{combined:.3f},{conventional:.3f}")
    try:
        simulate(2, 12, 64, 1.0, 2.0, 0.0, True, plus_one=False)
        print("combined without the extra warm-up forward: runs")
    except RuntimeError:
        print("combined without the extra warm-up forward: deadlock")
    print("\ncase,p,v,m,hop_ms,merged_step_ms,measured_s,predicted_s,error_pct,exposed_hops_s,error_with_hops_pct")
    for case, measured, predicted, p, v, m, hop, merged in shipped_rows():
        fwd = merged / 3.0
        extra = sum(
            sign * (simulate(p, v, m, fwd, 2.0 * fwd, hop, c) - simulate(p, v, m, fwd, 2.0 * fwd, 0.0, c))
            for sign, c in ((1.0, True), (-1.0, False))
        )
        print(
            f"{case},{p},{v},{m},{1e3 * hop:.3f},{1e3 * merged:.2f},{measured:.4f},{predicted:.4f},"
            f"{100 * (predicted / measured - 1):+.1f},{extra:.3f},{100 * ((predicted + extra) / measured - 1):+.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

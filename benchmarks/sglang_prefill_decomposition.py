"""Decompose the predicted ITL of SGLang serving rows: decode step, prefill iterations, their share,
under the three ways prompts can meet the decodes (issue 33, the held-out Qwen3-235B rows).

    python benchmarks/sglang_prefill_decomposition.py [CASE_FILE] [--match REGEX]

Default CASE_FILE: parallmelism/cases/inference_heldout.csv, REGEX `aicho-sglang` (aiconfigurator 0.12.0's
SGLang 0.5.6.post2 Qwen3-235B-A22B-FP8 rows on H200, never fitted on). Per row, milliseconds:

  step        the model's decode iteration (validate's decode_step_ms)
  pass        the model's prefill pass of one prompt run alone (the row evaluated with
              chunked_prefill=false: iteration_mixed_ms)
  mixed       share of iterations that carry a prompt (serving_load) as validate prices the row
  itl         validate's ITL (steady-state closed loop, cost/inference_iteration.py, prompts priced as
              chunks riding in decode iterations: the row's chunked_prefill default, true)
  itl_sep     the same closed loop with each prompt a pass of its own that stalls the decodes
              (chunked_prefill=false: SGLang's default, --enable-mixed-chunk off in
              python/sglang/srt/server_args.py of 0.5.x)
  P           prefill passes of one synchronized wave: ceil(c·S / C), C the iteration token budget
              (workload.prefill_chunk_tokens, 8192: SGLang's --chunked-prefill-size default for
              80-160 GiB GPUs, server_args.py _handle_gpu_memory_settings)
  wave_stall  mean over the wave's c requests of the passes after the one that ends its prompt, over
              its out−1 gaps: c clients that start at once with fixed lengths stay in step under
              SGLang's prefill-first scheduler (scheduler.py get_next_batch_to_run runs a new prefill
              batch before the running decode batch, packing prompts up to C tokens a pass), so every
              wave's prompts are prefilled back to back, all decode together and finish together.
              Pass time = its tokens / S · pass (linear in tokens: the prompts' attention is not
              re-priced per pass)
  itl_wave    step + wave_stall
  ttft_wave   mean over the wave of the passes up to and including its own (no request overhead,
              no first-token delay), against the row's reported TTFT (ttft_meas)
  implied     measured ITL − wave_stall: the decode step the measurement implies if the wave holds
  implied_t   the same with the wave's passes stretched by ttft_meas / ttft_wave (the row's own reported
              TTFT read as the wave's; a diagnosis of the held-out rows, never a fitted value)
Errors in % against measured_itl_ms. Prints numbers only; no timing, no fit.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402

from parallmelism.validate.inference_cases import inference_run_of, predicted_quantities  # noqa: E402
from parallmelism.validate.runner import _context, _evaluate_one  # noqa: E402

DEFAULT_CASES = Path(__file__).resolve().parent.parent / "parallmelism" / "cases" / "inference_heldout.csv"


def wave_ms(concurrency: int, prompt_tokens: int, budget_tokens: int, pass_ms: float, output_len: int):
    """(passes P, mean stall per gap, mean TTFT) of one synchronized wave (module docstring): prompt i
    holds tokens [i·S, (i+1)·S) of the wave, pass j the tokens [j·C, (j+1)·C)."""
    c, S, C = concurrency, prompt_tokens, budget_tokens
    total = c * S
    passes = math.ceil(total / C)
    times = [min(C, total - j * C) / S * pass_ms for j in range(passes)]
    stalls, ttfts = [], []
    for i in range(c):
        last = ((i + 1) * S - 1) // C  # the pass that ends prompt i
        ttfts.append(sum(times[: last + 1]))
        stalls.append(sum(times[last + 1 :]) / max(output_len - 1, 1))
    return passes, sum(stalls) / c, sum(ttfts) / c


def decompose(row: dict, ctx) -> dict:
    run = inference_run_of(row, *ctx)
    pred = _evaluate_one(run)
    sep_row = {**row, "chunked_prefill": "false"}
    sep = _evaluate_one(inference_run_of(sep_row, *ctx))
    itl = predicted_quantities(row, pred, ctx)["itl_ms"]
    itl_sep = predicted_quantities(sep_row, sep, ctx)["itl_ms"]
    step = float(pred["decode_step_ms"])
    pass_ms = float(sep["iteration_mixed_ms"])
    c, S, out = (int(row[k]) for k in ("concurrency", "input_len", "output_len"))
    passes, stall, ttft = wave_ms(c, S, run.workload.prefill_chunk_tokens, pass_ms, out)
    measured = float(row["measured_itl_ms"])
    ttft_meas = row.get("reported_ttft_ms") or row.get("measured_ttft_ms")

    def err(x: float) -> float:
        return round(100.0 * (x - measured) / measured, 1)

    return {
        "case": row["case"],
        "step": round(step, 2),
        "pass": round(pass_ms, 1),
        "mixed": round(float(pred["serving_load"]), 4),
        "itl": round(itl, 2),
        "itl_sep": round(itl_sep, 2),
        "P": passes,
        "wave_stall": round(stall, 2),
        "itl_wave": round(step + stall, 2),
        "measured": measured,
        "err": err(itl),
        "err_sep": err(itl_sep),
        "err_wave": err(step + stall),
        "implied": round(measured - stall, 2),
        "implied_t": None if ttft_meas is None else round(measured - stall * float(ttft_meas) / ttft, 2),
        "ttft_wave": round(ttft, 1),
        "ttft_meas": None if ttft_meas is None else float(ttft_meas),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="?", default=str(DEFAULT_CASES))
    ap.add_argument("--match", default="aicho-sglang", help="regular expression on the case name")
    args = ap.parse_args(argv)
    ctx = _context([], None)
    df = pd.read_csv(args.cases, dtype=str, keep_default_na=False).replace({"": None})
    rows = [
        decompose(r, ctx)
        for r in df.to_dict("records")
        if r.get("measured_itl_ms") is not None and re.search(args.match, r["case"])
    ]
    if not rows:
        sys.exit(f"no case in {args.cases} with a measured ITL matches {args.match!r}")
    table = pd.DataFrame(rows)
    table["case"] = table["case"].str.replace(r"^aicho-sglang0\.5\.6\.post2-q235b-h200-", "", regex=True)
    print(table.to_string(index=False))
    for col in ("err", "err_sep", "err_wave"):
        print(f"{col:9s} mean |error| {table[col].abs().mean():5.2f} %")


if __name__ == "__main__":
    main()

"""`plan serve --engine auto`: the same serving question planned with each engine (conf/engine/),
and which engine answers it cheapest and which fastest.

Each engine's answer is its cheapest colocated plan (`search.plan.serve_plan_table`'s first row:
fewest GPUs, then the shortest request). Cheapest engine: fewest GPUs, then the lowest $ per
million output tokens; fastest engine: the lowest TPOT of its plan, then TTFT. An engine whose
layouts meet no limit has no plan and is named as such.
"""

from __future__ import annotations

from ..words import counted


def engine_verdict(plans: list[tuple[str, object]], prefer: str | None = None) -> tuple[str | None, list[str]]:
    """(the cheapest engine's name or None when no engine has a plan, lines saying each engine's
    plan and the verdict). `plans`: (engine name, serve_plan_table DataFrame) per engine. Engines
    that tie are named together; the plan shown is `prefer`'s when it is among the cheapest."""
    answers = []
    lines = []
    for name, table in plans:
        if len(table) == 0:  # type: ignore[arg-type]
            lines.append(f"  {name}: no serving layout meets the limits")
            continue
        row = table.iloc[0]  # type: ignore[attr-defined]
        answers.append((name, row))
        lines.append(
            f"  {name}: {counted(int(row['total_gpus']), 'GPU')} ({int(row['replicas']):,} x tp{int(row['tp'])} "
            f"pp{int(row['pp'])} batch {int(row['batch'])}), TTFT {row['ttft_ms']:.1f} ms, TPOT "
            f"{row['tpot_ms']:.2f} ms, ${row['usd_per_million_output_tokens']:.3g} per million output tokens"
        )
    if not answers:
        return None, ["engine auto: no engine has a plan that meets the limits", *lines]
    cheapest = _best(answers, lambda r: (r["total_gpus"], r["usd_per_million_output_tokens"]))
    fastest = _best(answers, lambda r: (r["tpot_ms"], r["ttft_ms"]))
    pick = prefer if prefer in cheapest else cheapest[0]
    head = f"engine auto: cheapest {_names(cheapest)}, fastest {_names(fastest)} (the plan below is {pick}'s)"
    return pick, [head, *lines]


def _best(answers, key) -> list[str]:
    """The engines whose plan has the least `key` (several when they tie)."""
    least = min(key(row) for _, row in answers)
    return [name for name, row in answers if key(row) == least]


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else " = ".join(names) + " (tie)"

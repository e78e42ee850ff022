"""The README's serving family table (Validation: serving latency) is the golden validation table's
errors, grouped.

    python -m tests.golden.readme_families          # rewrite the table's rows in README.md

Rows: the cases of inference_measured.csv, inference_nim_h100.csv and inference_deepseek.csv, each in
one group (`GROUPS`); a family is a case without its concurrency suffix (-cN). Errors come from
tests/golden/validation.csv, which tests/test_golden.py keeps equal to what `validate` predicts, so a
change to the serving model cannot leave the table stale: tests/test_readme_numbers.py fails; run
this (after python -m tests.golden.refresh), review the diff, commit both.
"""

from __future__ import annotations

import re

from .readme_serve import README, REPO

FILES = ("inference_measured.csv", "inference_nim_h100.csv", "inference_deepseek.csv")
HEADER = "| family | ITL points | ITL mean \\|error\\| | TTFT points (concurrency 1) | TTFT mean \\|error\\| |\n|---|---|---|---|---|\n"
# (label, which case rows: model, disaggregated)
GROUPS = (
    ("TensorRT-LLM / NIM, Llama 3.1 8B, H100", lambda m, dis: m == "llama3.1-8b"),
    ("NIM, Llama 3.x 70B TP2, H100", lambda m, dis: m == "llama3.1-70b"),
    ("SGLang, DeepSeek-R1 TP8, H200", lambda m, dis: m == "deepseek-v3" and not dis),
    ("SGLang 1P1D disaggregated + MTP, DeepSeek-R1, H100", lambda m, dis: m == "deepseek-v3" and dis),
)


def _pct(x: float) -> str:
    return f"{x:.1f} %" if x < 10 else f"{x:.0f} %"


def current_rows() -> list[str]:
    import pandas as pd

    cases = []
    for name in FILES:
        df = pd.read_csv(REPO / "parallmelism" / "cases" / name, dtype=str, keep_default_na=False)
        for r in df.to_dict("records"):
            dis = r.get("disaggregated", "false") == "true"
            (label,) = [g for g, pick in GROUPS if pick(r["model"], dis)]  # one group each
            cases.append((r["case"], label))
    groups = pd.DataFrame(cases, columns=["case", "group"])
    table = pd.read_csv(REPO / "tests" / "golden" / "validation.csv").merge(groups, on="case")
    table["family"] = table["case"].map(lambda c: re.sub(r"-c\d+$", "", c))
    table["abs"] = table["error_pct"].abs()
    rows = []
    for label, _ in GROUPS:
        g = table[table["group"] == label]
        fams = g["family"].nunique()
        cells = [f"{label} ({fams} families)" if fams > 1 else label]
        for q in ("itl_ms", "ttft_ms"):
            x = g[g["quantity"] == q]["abs"]
            cells += [str(len(x)), _pct(x.mean())] if len(x) else ["–", "–"]
        rows.append("| " + " | ".join(cells) + " |")
    itl, ttft = (table[table["quantity"] == q]["abs"] for q in ("itl_ms", "ttft_ms"))
    rows.append(
        f"| all | {len(itl)} | {_pct(itl.mean())} (median {_pct(itl.median())}) | {len(ttft)} | {_pct(ttft.mean())} |"
    )
    return rows


def readme_rows(text: str) -> tuple[int, int, list[str]]:
    start = text.index(HEADER) + len(HEADER)
    end = text.index("\n\n", start) + 1
    return start, end, text[start:end].splitlines()


def main() -> None:
    text = README.read_text()
    start, end, _ = readme_rows(text)
    README.write_text(text[:start] + "".join(f"{x}\n" for x in current_rows()) + text[end:])
    print(f"rewrote the serving family table in {README}")


if __name__ == "__main__":
    main()

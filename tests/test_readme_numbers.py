"""Numbers quoted in the README are the model's current output (refresh: python -m tests.golden.readme_tables,
python -m tests.golden.readme_serve, python -m tests.golden.readme_export, python -m tests.golden.readme_families)."""

from tests.golden import readme_serve
from tests.golden.readme_tables import README, current_rows, readme_rows


def test_readme_step_time_table_is_current():
    _, _, rows = readme_rows(README.read_text())
    assert rows == current_rows(), "README step-time table is stale: run python -m tests.golden.readme_tables"


def test_readme_plan_serve_recommendations_are_current():
    text = README.read_text()
    _, _, lines = readme_serve.readme_lines(text)
    assert len(lines) == len(readme_serve.serve_commands(text)) >= 2
    assert lines == readme_serve.current_lines(text), (
        "README plan serve recommendations are stale: run python -m tests.golden.readme_serve"
    )


def test_readme_export_excerpts_are_current():
    """Every line of the two export excerpts, numbers included, is what the command prints now
    (was: only the flags were held, and the serving excerpt's TTFT, TPOT and throughput went stale)."""
    from tests.golden import readme_export

    text = README.read_text()
    for block in readme_export.BLOCKS:
        assert readme_export.readme_excerpt(text, block) == readme_export.current_excerpt(text, block), (
            f"README {block} excerpt is stale: run python -m tests.golden.readme_export"
        )


def test_readme_engine_table_is_current():
    """The README's per-engine table (rows and mean |error| of ITL at light load and of TTFT) is the
    report `validate` prints, from the golden validation table (was: nothing held it, and NCCL's
    protocols moved TensorRT-LLM's TTFT from 15.5 % to 14.0 % under an unchanged table)."""
    from tests.conftest import golden_engine_errors

    by, _ = golden_engine_errors()
    names = {"NIM": "nim", "TensorRT-LLM": "trtllm", "vLLM": "vllm", "SGLang": "sglang"}
    text = README.read_text()
    block = text[text.index("| engine (sample) |") :].split("\n\n", 1)[0].splitlines()[2:]
    assert len(block) == len(by) >= 6
    stale = "README engine table is stale: copy the row from `parallmelism validate`'s 'engine ...' lines"
    for line in block:
        label, itl_rows, itl, ttft_rows, ttft = (c.strip() for c in line.strip("|").split("|"))
        r = by[(names[label.split(" (")[0]], label.split("(", 1)[1].split(":")[0])]
        if r["itl_rows"]:
            assert int(itl_rows) == r["itl_rows"] and itl == f"{r['itl_mean_abs_pct']:.1f} %", (stale, label, r)
        else:
            assert itl_rows == itl == "–", (stale, label, r)
        if r["ttft_rows"]:
            assert int(ttft_rows.split()[0]) == r["ttft_rows"] and ttft == f"{r['ttft_mean_abs_pct']:.1f} %", (
                stale,
                label,
                r,
            )
        else:
            assert ttft_rows == ttft == "–", label


def test_readme_serving_family_table_is_current():
    """The serving family table (ITL and TTFT points and mean |error| per group of the reference,
    NIM and DeepSeek case files) is the golden validation table's, grouped (was: nothing held it, and
    it read DeepSeek-R1 ITL 3.2 %, all 5.5 % (median 2.5 %) where validate gave 5.6 %, 5.7 % (3.1 %))."""
    from tests.golden import readme_families

    _, _, rows = readme_families.readme_rows(README.read_text())
    assert rows == readme_families.current_rows(), (
        "README serving family table is stale: run python -m tests.golden.readme_families"
    )

"""Numbers quoted in the README are the model's current output (refresh: python -m tests.golden.readme_tables,
python -m tests.golden.readme_serve, python -m tests.golden.readme_export)."""

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

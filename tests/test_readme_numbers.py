"""Numbers quoted in the README are the model's current output (refresh: python -m tests.golden.readme_tables)."""

from tests.golden.readme_tables import README, current_rows, readme_rows


def test_readme_step_time_table_is_current():
    _, _, rows = readme_rows(README.read_text())
    assert rows == current_rows(), "README step-time table is stale: run python -m tests.golden.readme_tables"

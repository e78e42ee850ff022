"""The training overheads in conf/stack/NAME.yaml are what their fit gives on today's model: for megatron-te,
python -m parallmelism.validate.calibrate on training_measured.csv (one fit per accelerator); for every other
stack, benchmarks/fit_stack_overheads.py on that stack's rows (one fit for the stack). The fit is re-run here
in full (its grid and the full model's re-run of the grid's best), so a change to the cost model that moves an
optimum fails here and the stack file is refitted (run the script), instead of drifting: session 21 found
torchtitan's layer_launch_us, pytorch-fsdp1's unit_sync_us and megatron-te's A100 terms no longer the fit after
the collective model changed under them. The serving engines' counterpart is tests/test_serving_overhead_fit.py.
"""

import pytest

from conftest import REPO, benchmark_module

STACKS = sorted(p.stem for p in (REPO / "conf" / "stack").glob("*.yaml"))
CALIBRATED = "megatron-te"  # fitted per accelerator by validate/calibrate.py, not by the script


@pytest.fixture(scope="module")
def script():
    return benchmark_module("fit_stack_overheads")


@pytest.fixture(scope="module")
def rows(script):
    return script.rows_by_stack()


def _shipped(name):
    from parallmelism.config.compose import load_option

    return load_option("stack", name)


def test_every_stack_file_has_rows_to_fit_on(rows):
    assert set(STACKS) <= set(rows), set(STACKS) - set(rows)


@pytest.mark.parametrize("name", [s for s in STACKS if s != CALIBRATED])
def test_shipped_stack_overheads_are_the_fit(script, rows, name):
    """One fit per stack: the stack file's one fitted entry, which every accelerator its rows ran on takes,
    holds the fitted terms at the fit's values, the terms it states as stated, every other term at 0."""
    from parallmelism.specs import Overheads

    spec = _shipped(name)
    entries = {acc: oh for acc, oh in spec.overheads.items() if isinstance(oh, Overheads)}
    assert len(entries) == 1, (name, sorted(entries))
    ((acc, shipped),) = entries.items()
    ran_on = {item[2].hardware.name for item in rows[name]}
    assert all(spec.overheads_for(hw)[0] is shipped for hw in ran_on), (name, ran_on)
    fitted = script.fit_stack(name, rows[name])
    got = {t: float(getattr(shipped, t)) for t in fitted}  # every term the fit sets (TERMS_ALL and the stated)
    assert got == pytest.approx(fitted, abs=1e-9), (
        name,
        acc,
        {t: (got[t], fitted[t]) for t in got if got[t] != fitted[t]},
    )


@pytest.fixture(scope="module")
def calibrated():
    from parallmelism.validate import calibrate

    return {
        name: (cases, runs, measured, growth) for name, cases, runs, measured, growth in calibrate._by_accelerator()
    }


@pytest.mark.parametrize("accelerator", ["a100-sxm-80gb", "h100-sxm-80gb"])
def test_shipped_megatron_te_overheads_are_the_calibrate_fit(calibrated, accelerator):
    """megatron-te's entry for each accelerator with rows in training_measured.csv is calibrate.py's fit on them."""
    from parallmelism.validate import calibrate

    cases, runs, measured, growth = calibrated[accelerator]
    terms, _, _ = calibrate.fit(cases, runs, measured, growth=growth)
    shipped, _ = _shipped(CALIBRATED).overheads_for(accelerator)
    got = {t: float(getattr(shipped, t)) for t in calibrate.TERMS}
    assert got == pytest.approx(terms, abs=1e-9), (accelerator, got, terms)


def test_megatron_te_fits_every_accelerator_with_rows(calibrated):
    assert sorted(calibrated) == ["a100-sxm-80gb", "h100-sxm-80gb"]

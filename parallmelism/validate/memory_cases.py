"""Memory case files (columns case, quantity, measured_gib): the states and activations a stage holds."""

from __future__ import annotations

from ..errors import UserError
from .cases import CaseKind, evaluate_one, get, result_row, train_run_of

# memory case quantity -> how to read it from an evaluated row
MEMORY_QUANTITIES = {
    # the stage's weights, gradients and optimizer states, embedding and output head included:
    # what the seed PoC states for the whole 405B (norm weights excluded, 0.001 % of it)
    "weights_grads_optimizer_per_gpu": lambda r: r["mem_states_gib"],
    # the transformer layers' share only: Korthikanti et al. 2022 Figure 1 counts these (18 bytes
    # per parameter); the embedding/output-head share on the stage is its own column
    "layer_weights_grads_optimizer_per_gpu": lambda r: r["mem_states_gib"] - r["mem_states_embedding_gib"],
    "activations_per_gpu": lambda r: r["mem_activations_gib"],
}
# Sources whose states count the transformer layers only: a row citing one under the whole-stage
# name (the shared reference file names both alike) is the layers' quantity.
LAYERS_ONLY_SOURCES = ("Korthikanti et al. 2022 Figure 1",)


def memory_quantity(row: dict) -> str:
    """The quantity a memory case row states: its `quantity`, read as the layers' share where its
    source counts only the layers (LAYERS_ONLY_SOURCES)."""
    q = row["quantity"]
    if q == "weights_grads_optimizer_per_gpu" and str(get(row, "source", "")).startswith(LAYERS_ONLY_SOURCES):
        return "layer_weights_grads_optimizer_per_gpu"
    return q


def memory_rows(df, ctx):
    rows = []
    for row in df.to_dict("records"):
        q = memory_quantity(row)
        if q not in MEMORY_QUANTITIES:
            raise UserError(f"case {row['case']!r}: unknown quantity {q!r}; known: {', '.join(MEMORY_QUANTITIES)}")
        run = train_run_of(row, ctx[0], ctx[1], ctx[2], stack_of=ctx[4])
        pred = float(MEMORY_QUANTITIES[q](evaluate_one(run)))
        rows.append(result_row(row, q, "GiB", row["measured_gib"], pred))
    return rows


KIND = CaseKind(["case", "quantity", "measured_gib"], memory_rows, ["measured_gib"])

"""The draft model of speculative decoding, loaded at the config edge and passed to the serving
cost model (cost/ reads no files)."""

from __future__ import annotations

from ..specs import InferenceWorkload, ModelSpec


def draft_model_of(model: ModelSpec, wl: InferenceWorkload) -> ModelSpec | None:
    """The draft model of wl (shipped or $PARALLMELISM_CONFIG_PATH models), checked smaller than
    the model it drafts for; None without a draft."""
    if wl.spec_method != "draft":
        return None
    from ..cost.params import total_params
    from ..errors import UserError
    from .compose import load_option

    draft = load_option("model", str(wl.draft_model))  # validated: spec_method=draft names one
    n_draft, n_model = total_params(draft), total_params(model)
    if n_draft >= n_model:
        raise UserError(
            f"draft model {draft.name} ({n_draft / 1e9:.1f}B parameters) is not smaller than "
            f"{model.name} ({n_model / 1e9:.1f}B); pick a smaller draft_model or spec_method=mtp"
        )
    if draft.vocab != model.vocab:
        raise UserError(
            f"draft model {draft.name} has a {draft.vocab}-token vocabulary, {model.name} "
            f"{model.vocab}: speculative decoding needs the same tokenizer"
        )
    return draft

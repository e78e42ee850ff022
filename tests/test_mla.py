"""Multi-head latent attention (DeepSeek-V3): spec, exact parameter counts, FLOPs, KV cache, activations.

Reference values: ../shared/reference/model_architectures.csv row deepseek-v3 (shapes; official 671B
total / 37B active) and transformers' DeepseekV3ForCausalLM built on the meta device (exact count,
671,026,404,352; crosscheck extra). Closed forms are written out here term by term from the HF module
list, not taken from parallmelism.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from parallmelism.config import load_option
from parallmelism.specs import ModelSpec

# A small DeepSeek-V3-style model: 2 dense layers then MoE with a shared expert; q compression on.
SMALL = dict(name="dsv3-small", hidden=256, layers=4, heads=8, ffn_hidden=512, vocab=1000,
             mla=dict(q_lora_rank=96, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=24),
             moe=dict(num_experts=8, top_k=2, ffn_hidden=128, first_dense_layers=2, num_shared_experts=1))
SMALL_NO_QLORA = {**SMALL, "name": "dsv2-lite-style", "mla": {**SMALL["mla"], "q_lora_rank": None}}


@pytest.mark.parametrize("bad,text", [
    (dict(kv_heads=4), "kv_heads=4 must equal heads=8"),
    (dict(head_dim=64), "head_dim=64 must be unset"),
    (dict(qk_norm=True), "not supported with MLA"),
    (dict(mla={**SMALL["mla"], "kv_lora_rank": 0}), "kv_lora_rank"),
])
def test_bad_mla_specs_refused(bad, text):
    with pytest.raises(ValidationError, match=text):
        ModelSpec.model_validate({**SMALL, **bad})


def test_mla_off_by_default():
    m = load_option("model", "llama3.1-8b")
    assert m.mla is None and m.d == 128
    assert ModelSpec.model_validate({**SMALL, "head_dim": 48}).d == 48  # nope + rope



"""Why a layout is dropped: one registry of reason keys -> the sentence users read.

Training rules (grid/layouts.py) and serving rules (grid/inference.py) share the keys of the
rules they share; the drop table and LayoutGrid.explain_empty read DROP_REASONS. Order = the
order the rules are checked.
"""

from __future__ import annotations

TRAINING_DROP_REASONS: dict[str, str] = {
    "product_not_dividing_ngpus": "tp·pp·cp does not divide ngpus",
    "ngpus_exceeds_fabric": "ngpus exceeds the scale-up domain and the hardware has no scale-out tier",
    "tp_exceeds_scale_up_domain": "tp is larger than the scale-up (NVLink) domain (grid.cross_node_tp=true keeps "
    "such layouts and prices their TP collectives on the scale-out link)",
    "tp_spans_partial_domain": "tp spans scale-up domains but is not a multiple of the domain size "
    "(grid.cross_node_tp keeps whole domains only)",
    "heads_not_divisible_by_tp": "query heads are not divisible by tp",
    "kv_heads_incompatible_with_tp": "kv heads neither divide by tp nor divide tp (no whole-head replication)",
    "ffn_not_divisible_by_tp": "FFN size (or expert FFN size) is not divisible by tp",
    "layers_not_divisible_by_pp": "layers are not divisible by pp (grid.uneven_pipeline=false)",
    "pipeline_stage_empty": "layers cannot fill pp stages (uneven split leaves the first or last stage empty)",
    "seq_not_divisible_by_cp": "sequence length is not divisible by 2·cp (load-balanced causal ring or all-gather "
    "attention), or by cp with Ulysses (cp_comm_type=a2a)",
    "cp_a2a_heads_not_divisible": "workload.cp_comm_type=a2a (Ulysses) gives each CP rank heads/(tp·cp) whole heads: heads per TP rank must be a multiple of cp",
    "cp_needs_fused_attention": "context parallelism needs fused attention (workload.flash_attention=true): Transformer Engine's CP runs only in its flash/cuDNN attention kernels",
    "ep_on_dense_model": "ep > 1 on a model without experts",
    "experts_not_divisible_by_ep": "experts are not divisible by ep",
    "ep_not_dividing_dp_cp": "ep does not divide dp·cp (EP lives inside the data-parallel × CP group)",
    "expert_grid_not_dividing": "ep·expert_tp does not divide tp·cp·dp (MoE parallel folding: the expert grid "
    "expert_tp × ep × expert-DP covers the same ranks as the attention's tp × cp × dp; Megatron-Core "
    "initialize_model_parallel)",
    "batch_not_divisible_by_dp_micro_batch": "global batch is not divisible by dp·micro_batch",
    "vpp_needs_pp": "virtual pipeline stages (vpp > 1) need pp > 1",
    "vpp_needs_1f1b": "virtual pipeline stages (vpp > 1) only exist for the 1F1B schedule",
    "layers_not_divisible_by_pp_vpp": "layers per pipeline stage are not divisible by vpp (interleaving needs equal chunks)",
    "micro_batches_not_divisible_by_pp": "interleaved 1F1B needs the number of micro-batches divisible by pp",
    "sequence_parallel_needs_tp": "sequence parallelism needs tp > 1",
    "folding_needs_sequence_parallel": "MoE layers with tp > 1 need sequence parallelism in training (Megatron-Core "
    "MoELayer refuses MoE and tensor parallelism without it); MoE parallel folding (workload.expert_tp) is "
    "modelled for that case",
    "sharding_needs_dp": "a DP sharding strategy other than NO_OP needs a data-parallel group > 1",
    "param_offload_needs_fully_shard": "workload.param_offload keeps parameter shards on the host, which only "
    "FULLY_SHARD (ZeRO-3) has (DeepSpeed: offload_param is a stage-3 option)",
    "dp_not_multiple_of_dp_shard_size": "dp is not a multiple of workload.dp_shard_size (hybrid sharding groups)",
    # the training stack's layouts (specs StackLayouts; conf/stack/NAME.yaml `layouts:` with sources)
    "stack_no_tp": "the stack runs no tensor parallelism (stack.layouts.tensor_parallel=false)",
    "stack_no_pp": "the stack runs no pipeline parallelism (stack.layouts.pipeline_parallel=false)",
    "stack_no_vpp": "the stack runs no interleaved pipeline (stack.layouts.interleaved_pipeline=false)",
    "stack_no_cp": "the stack runs no context parallelism (stack.layouts.context_parallel=false)",
    "stack_no_ep": "the stack runs no expert parallelism (stack.layouts.expert_parallel=false)",
    "stack_no_sharding_with_pp": "the stack does not shard gradients or parameters together with a pipeline "
    "(stack.layouts.sharding_with_pipeline=false: DeepSpeed ZeRO-2/3 with pp > 1)",
    "stack_dp_sharding": "the stack does not run this DP sharding strategy (stack.layouts.dp_sharding)",
}

INFERENCE_DROP_REASONS: dict[str, str] = {
    "replica_not_dividing_ngpus": "tp·pp·sp (one serving replica) does not divide ngpus",
    "pp_exceeds_layers": "pp is larger than the number of layers (a stage would be empty)",
    "prompt_not_divisible_by_sp": "input length is not divisible by 2·sp (load-balanced causal prompt sharding)",
    "ep_not_dividing_tp_or_dp_sp": "ep divides neither tp (experts over the TP group) nor dp·sp (over replicas)",
}

DROP_REASONS: dict[str, str] = {**TRAINING_DROP_REASONS, **INFERENCE_DROP_REASONS}

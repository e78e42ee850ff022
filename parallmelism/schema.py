"""The output schema: column name -> meaning. Names carry units; renaming one is a breaking change.

Seed PoC (LLM Parallelism Explorer) columns map onto ours as noted in `SEED_COLUMNS`.
"""

# The axes of a training layout, in the order every table shows them.
LAYOUT_AXES = ["tp", "pp", "cp", "ep", "dp", "vpp", "micro_batch", "dp_sharding", "recompute", "sequence_parallel"]

TRAINING_COLUMNS: dict[str, str] = {
    "model": "model name (models/NAME.yaml)",
    "hardware": "accelerator name (hardware/NAME.yaml)",
    "workload": "train or inference",
    "ngpus": "GPUs in the job",
    "tp": "tensor-parallel size",
    "pp": "pipeline-parallel size",
    "cp": "context-parallel size (sequence split for attention, ring)",
    "ep": "expert-parallel size (inside dp·cp)",
    "dp": "data-parallel size = ngpus / (tp·pp·cp)",
    "vpp": "virtual pipeline stages per PP rank (1 = not interleaved)",
    "micro_batch": "sequences per micro-batch (b)",
    "num_micro_batches": "micro-batches per step per DP rank, m = global_batch / (dp·micro_batch)",
    "dp_sharding": "NO_OP | OPTIMIZER_STATES | OPTIMIZER_STATES_AND_GRADS | FULLY_SHARD",
    "recompute": "activation recomputation: none | selective | full",
    "sequence_parallel": "Megatron sequence parallelism (activations outside TP regions split by tp)",
    "kv_replication": "copies of each KV head across the TP group (tp / kv_heads when tp > kv_heads)",
    "layers_first_stage": "transformer layers on the first pipeline stage (uneven splits shorten it)",
    "layers_per_stage": "transformer layers on a middle pipeline stage, ceil(layers / pp)",
    "layers_last_stage": "transformer layers on the last pipeline stage",
    "seq_len": "tokens per sequence",
    "global_batch": "sequences per optimizer step",
    "params_total": "parameters of the model",
    "params_active": "parameters used per token (top-k experts)",
    "params_per_gpu": "parameters held by one GPU of the reported stage",
    "params_embedding_per_gpu": "embedding/output-head/final-norm parameters on that GPU",
    "params_attention_per_gpu": "attention parameters on that GPU",
    "params_mlp_per_gpu": "dense MLP, norm, router and shared-expert parameters on that GPU",
    "params_experts_per_gpu": "routed-expert parameters on that GPU",
    "mem_weights_gib": "weights per GPU, GiB",
    "mem_grads_gib": "gradients per GPU, GiB",
    "mem_optimizer_gib": "fp32 master weights and Adam moments (workload.optimizer_moments_dtype) per GPU, GiB",
    "mem_states_gib": "weights + grads + optimizer per GPU, GiB",
    "mem_states_embedding_gib": "part of mem_states_gib held for embedding/output head, GiB",
    "mem_fsdp_gather_gib": "FULLY_SHARD gathered bf16 layer buffers (current + prefetch), GiB",
    "mem_activations_gib": "activations saved for backward incl. logits, GiB",
    "mem_logits_gib": "logits and cross-entropy copy on the last stage, GiB",
    "mem_host_offload_gib": "workload.activation_offload_layers > 0 only: saved activations held in host memory "
    "per GPU (fits needs them within hardware.host_memory_gib where set), GiB",
    "mem_host_optimizer_gib": "workload.optimizer_offload only: fp32 master weights, Adam moments and the fp32 "
    "gradient the CPU optimizer reads, in host memory per GPU (fits needs them, with any offloaded activations, "
    "within hardware.host_memory_gib where set), GiB",
    "mem_total_gib": "states + FSDP buffers + activations, GiB",
    "hbm_usable_gib": "allocatable HBM per GPU, GiB",
    "mem_headroom_gib": "hbm_usable_gib - mem_total_gib",
    "fits": "mem_total_gib <= hbm_usable_gib",
    "mem_stage": "pipeline stage reported (first, second or last): the one with the larger total",
    "pp_inflight_micro_batches": "micro-batches' worth of layer activations held by that stage",
    "usd_per_step": "search commands: ngpus · time_step_s · cost_per_gpu_hour_usd / 3600",
    "pp_bubble_rate": "bubble time / ideal compute time: (p-1)/(v·m); ZB-H1 (p-1)/(3m)",
    "time_step_s": "one optimizer step: slowest stage (m micro-batches + exposed DP + optimizer) + bubble + exposed PP, s",
    "time_compute_s": "roofline compute of that stage: m·(fwd + bwd + recompute) + optimizer step, s",
    "time_bubble_s": "pipeline bubble: bubble rate × m × a middle stage's micro-batch time + the fill/drain P2P hops 2·(p−1)·v, s",
    "time_comm_exposed_s": "communication on the critical path (sum of the _exposed_s columns), s",
    "time_overhead_s": "named overheads on the critical stage (cost/overheads.py): per-layer launch, fixed per-step host time, SM contention of hidden comm, stragglers, s",
    "time_optimizer_offload_s": "workload.optimizer_offload only: the CPU optimizer step at the host memory's "
    "bandwidth (or the stack's cpu_optimizer_s_per_gparam per host, whichever is longer), the updated parameters' "
    "upload and the gradient copies not hidden under backward (cost/offload.py), s",
    "time_param_offload_s": "workload.param_offload only: the parameter shards' host-to-device fetches before "
    "each FSDP gather not hidden under the stage's compute (cost/offload.py), s",
    "time_offload_exposed_s": "workload.activation_offload_layers > 0 only: activation copies to and from host "
    "memory on the critical stage not hidden under a layer's forward or backward (cost/offload.py), s",
    "time_comm_tp_s": "TP collectives per step on one GPU, link time, s",
    "time_comm_cp_s": "CP ring send/recv per step on one GPU, link time, s",
    "time_comm_ep_s": "EP dispatch/combine all-to-alls per step on one GPU, link time, s",
    "time_comm_dp_s": "DP gradient reduce + parameter gathers per step (bucketed; FSDP per layer), link time, s",
    "time_comm_pp_s": "PP activation/gradient send/recv per step on one stage, link time, s",
    "time_comm_tp_exposed_s": "TP time not hidden (all of it unless workload.overlap_tp_comm), s",
    "time_comm_cp_exposed_s": "CP ring time not hidden under attention, s",
    "time_comm_ep_exposed_s": "EP all-to-all time on the critical path (all of it unless workload.overlap_ep_comm), s",
    "time_comm_dp_exposed_s": "DP time not hidden under backward/forward (workload.overlap_dp_comm), s",
    "time_comm_pp_exposed_s": "this stage's PP send/recv waiting on the wire (all of time_comm_pp_s unless workload.overlap_pp_comm; <= it), s",
    "link_scale_up_busy_s": "busy seconds per step of one critical-stage GPU's scale-up port (NVLink): Σ time_comm_<axis>_s of the axes inside the domain",
    "link_scale_out_busy_s": "busy seconds per step of that GPU's own NIC: Σ time_comm_<axis>_s of the axes whose group leaves the domain; time_step_s >= both",
    "tokens_per_s": "global_batch·seq_len / time_step_s",
    "tokens_per_s_per_gpu": "tokens_per_s / ngpus",
    "tflops_per_gpu": "model FLOPs per step / (time_step_s·ngpus), TFLOP/s (Megatron convention, non-causal)",
    "mfu": "model FLOPs utilisation vs the dense peak of workload.precision (fp8: the fp8 peak; non-causal attention convention)",
    "mfu_bf16_peak": "model FLOPs utilisation vs the bf16 dense peak (equals mfu for bf16/fp16 runs)",
    "hfu": "hardware FLOPs (incl. recompute) utilisation vs the dense peak of workload.precision (non-causal)",
    "flops_model_per_step": "Megatron num_floating_point_operations, whole job, attention NON-causal, FLOPs",
    "flops_hardware_per_step": "model FLOPs + recomputed forward, whole job, attention non-causal, FLOPs",
    "hbm_bytes_per_step": "HBM bytes read + written per step by one GPU of the critical stage",
    "arithmetic_intensity": "executed FLOPs / HBM bytes on that GPU (causal flash, FLOP/byte)",
    "bound": "what dominates the step: compute | memory | communication | bubble",
}

# Seed PoC column -> our column (or how to get it).
SEED_COLUMNS: dict[str, str] = {
    "name": "model",
    "ngpus": "ngpus",
    "TP / PP / EP / CP / DP": "tp / pp / ep / cp / dp",
    "sub_seq_length": "seq_len / cp",
    "micro_batch_size": "micro_batch",
    "num_of_micro_batches": "num_micro_batches",
    "data_parallel_sharding_strategy": "dp_sharding",
    "total_memory_gb (GiB)": "mem_total_gib",
    "model_and_optimizer_states_memory_gb (GiB)": "mem_states_gib",
    "activations_memory_gb (GiB)": "mem_activations_gib",
    "pipeline bubble rate": "pp_bubble_rate",
    "token imbalance hypothesis": "workload.moe_imbalance (input)",
}

# The layout columns of a serving row (grid/inference.py writes them; the serving breakdown reads them).
INFERENCE_LAYOUT_COLUMNS = ["ngpus", "tp", "pp", "sp", "ep", "dp", "batch", "kv_replication", "layers_per_stage"]

# workload=inference (grid/inference.py, cost/inference*.py): column name -> meaning.
# Attention FLOPs are CAUSAL (S(S+1)/2 pairs per prompt); a multiply-add is 2 FLOPs.

INFERENCE_COLUMNS: dict[str, str] = {
    "model": "model name (models/NAME.yaml)",
    "hardware": "accelerator name (hardware/NAME.yaml)",
    "workload": "train or inference",
    "ngpus": "GPUs in the deployment",
    "tp": "tensor-parallel size (heads, FFN, vocabulary split)",
    "pp": "pipeline stages per replica",
    "sp": "prompt-sharding ranks per replica (prefill split over sp; KV cache stays split by sp)",
    "ep": "expert-parallel size: experts split over ep ranks of the TP group (ep | tp) or of dp·sp",
    "dp": "independent replicas = ngpus / (tp·pp·sp)",
    "batch": "concurrent sequences per replica",
    "kv_replication": "copies of each KV head across the TP group (tp / kv_heads when tp > kv_heads)",
    "layers_per_stage": "layers on the busiest pipeline stage, ceil(layers / pp)",
    "input_len": "prompt tokens per sequence",
    "output_len": "generated tokens per sequence",
    "prefill_chunks": "chunks the prompt is cut into: continuous, ceil(input_len / iteration token budget left "
    "by b-1 decode tokens); static, sequence-pipeline chunks (1 without pp)",
    "decode_micro_batches": "decode micro-batches in flight, min(batch, pp)",
    "decode_pp_idle": "fraction of pipeline stages idle in decode, 1 - micro-batches/pp",
    "prefill_ms": "prefill of one prompt: its chunks' mixed iterations (continuous) or the batch's prompts "
    "(static), causal attention, + iteration overhead, ms",
    "decode_step_ms": "one decode iteration of the whole batch through the pipeline + iteration overhead, ms",
    "spec_tokens_per_step": "speculative decoding: expected tokens per verify step (1 - a^(k+1))/(1 - a); 1 without",
    "serving_load": "fraction of iterations that carry a prefill chunk (continuous batching; 0 static)",
    "iteration_mixed_ms": "continuous: one iteration carrying a prefill chunk with the other b-1 decode tokens; "
    "static: the batch's prefill pass, ms",
    "ttft_wait_ms": "mean wait before the prompt's first chunk runs: residual of the iteration in flight + "
    "the engine's batch-waiting hold (engine.batch_wait_*) + queue behind other prompts (continuous batching), ms",
    "ttft_ms": "time to first token (mean): wait + prefill_ms + request overhead + the first token's send delay "
    "(one iteration with overlap scheduling; show's ttft rows), ms",
    "tpot_ms": "time per output token = inter-token latency (mean over decode and mixed iterations), ms",
    "e2e_latency_ms": "ttft_ms less the first token's send delay + (output_len - 1)·tpot_ms, ms",
    "throughput_tokens_per_s": "tokens/s over all replicas (phase prefill: input tokens per TTFT less the send delay; decode: b/TPOT; "
    "request: output tokens per e2e latency)",
    "throughput_tokens_per_s_per_gpu": "throughput_tokens_per_s / ngpus",
    "cost_per_million_tokens": "USD per 1e6 tokens of that throughput at hardware cost_per_gpu_hour_usd",
    "max_batch": "largest batch per replica whose weights + KV cache + workspace fit in HBM",
    "mem_weights_gib": "weights per GPU (weight_dtype linear layers, 16-bit norms/embedding/head), GiB",
    "mem_kv_cache_gib": "KV cache per GPU at input_len + output_len context for the batch, GiB",
    "mem_workspace_gib": "largest prefill transient (activations of a chunk, gathered K/V, logits), GiB",
    "mem_total_gib": "weights + KV cache + workspace per GPU, GiB",
    "hbm_usable_gib": "allocatable HBM per GPU, GiB",
    "mem_headroom_gib": "hbm_usable_gib - mem_total_gib",
    "fits": "mem_total_gib <= hbm_usable_gib",
    "hbm_bytes_per_token": "HBM bytes all GPUs of a replica move per generated token (decode), bytes",
    "arithmetic_intensity": "decode FLOPs per HBM byte on one GPU (roofline x-axis), FLOP/byte",
    "flops_prefill_per_gpu": "prefill FLOPs on one GPU of the busiest stage (causal attention)",
    "flops_decode_per_gpu": "FLOPs of one decode step on one GPU of the busiest stage",
    "time_comm_prefill_ms": "exposed collective time in prefill on the busiest stage, ms",
    "time_comm_decode_ms": "collective time per decode step summed over the pipeline, ms",
    "bound_prefill": "what dominates prefill: compute | memory | communication",
    "bound_decode": "what dominates a decode step: compute | memory | communication",
}

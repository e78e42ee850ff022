"""NVIDIA Dynamo DynamoGraphDeployment (Kubernetes manifest) for a disaggregated `plan serve` row:
a prefill and a decode worker service with their replica counts, GPUs and vLLM worker arguments.

Field names and value rules: ai-dynamo/dynamo at commit 0044eb903566e0632bdf7bb7388c967d946643af,
examples/backends/vllm/deploy/disagg.yaml (apiVersion nvidia.com/v1alpha1, kind
DynamoGraphDeployment; spec.services.<name>: componentType frontend | worker, subComponentType
prefill | decode, replicas, resources.limits.gpu (GPUs per pod), extraPodSpec.mainContainer
image / workingDir / command `python3 -m dynamo.vllm` / args: --model, --is-prefill-worker or
--is-decode-worker, then vLLM's engine arguments) and examples/backends/sglang/deploy/
disagg-multinode.yaml (multinode.nodeCount: a worker over several nodes, gpu per node). A worker's
engine arguments are vllm.flags of its pool's layout (vLLM EngineArgs, vllm.py), so a pool vLLM
cannot run (prompt sharding, sp > 1) is refused in vLLM's sentence. The image tag and the model
checkpoint are left as ${VERSION} and ${MODEL} for envsubst, as Dynamo's own examples leave them."""

from __future__ import annotations

import re

from ..errors import UserError
from . import vllm
from .layout import Planned, header_fields
from .serving import request_shape_comment
from ..words import plural

SOURCE = (
    "ai-dynamo/dynamo examples/backends/vllm/deploy/disagg.yaml (DynamoGraphDeployment nvidia.com/v1alpha1) "
    "@ 0044eb90; worker args: vLLM EngineArgs @ 99d7eb5d"
)
KIND = "disaggregated"
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:${VERSION}"
SERVICES = {"prefill": "VllmPrefillWorker", "decode": "VllmDecodeWorker"}
ROLE_FLAG = {"prefill": "--is-prefill-worker", "decode": "--is-decode-worker"}
FIELDS: dict[str, str] = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoGraphDeployment",
    "metadata.name": "model-disagg",
    "spec.backendFramework": "vllm",
    "spec.services.Frontend": "componentType frontend, one replica",
    "spec.services.<worker>.componentType": "worker",
    "spec.services.<worker>.subComponentType": "prefill | decode",
    "spec.services.<worker>.replicas": "{pool}_replicas",
    "spec.services.<worker>.resources.limits.gpu": "{pool}_replica_gpus per pod (split over nodes)",
    "spec.services.<worker>.multinode.nodeCount": "{pool}_replica_gpus / GPUs per node",
    "spec.services.<worker>.extraPodSpec.mainContainer.args": "--model, the role flag, vllm.flags of the pool",
}


def render(p: Planned) -> str:
    """One layout is not a disaggregated deployment."""
    raise UserError(
        "--to dynamo writes the two pools of a `plan serve` file's disaggregated row; give that file "
        "(--case disaggregated), not one layout"
    )


def _quote(v) -> str:
    return '"' + str(v).replace('"', '\\"') + '"'


def render_pools(pools: dict[str, Planned], replicas: dict[str, int], row: dict) -> str:
    """The manifest: a Frontend and one worker service per pool (module docstring). pools/replicas:
    {"prefill": ..., "decode": ...}; row: the plan row (its TTFT, ITL, KV transfer and GPUs)."""
    pre = pools["prefill"]
    total = sum(replicas[k] * pools[k].ngpus for k in pools)
    lay = {k: " ".join(f"{a}={v}" for a, v in pools[k].axes.items()) for k in pools}
    lines = [
        f"# parallmelism export: model={pre.model} hardware={pre.hardware} workload=inference ngpus={total}",
        f"# layout: prefill {replicas['prefill']} x ({lay['prefill']}); decode {replicas['decode']} x ({lay['decode']})",
        f"# predicted: TTFT {float(row['ttft_ms']):.1f} ms (prefill {float(row['prefill_ms']):.1f} ms, "
        f"KV transfer {float(row['kv_transfer_ms']):.2f} ms), ITL {float(row['tpot_ms']):.2f} ms, "
        f"{total:,} GPUs at {float(row['qps']):g} requests/s",
        f"# field names: {SOURCE}",
        request_shape_comment(pre.workload),
        "apiVersion: nvidia.com/v1alpha1",
        "kind: DynamoGraphDeployment",
        "metadata:",
        f"  name: {re.sub(r'[^a-z0-9-]+', '-', pre.model.lower())}-disagg",
        "spec:",
        "  backendFramework: vllm",
        "  services:",
        "    Frontend:",
        "      componentType: frontend",
        "      replicas: 1",
        "      extraPodSpec:",
        "        mainContainer:",
        f"          image: {IMAGE}",
    ]
    for pool, p in pools.items():
        try:
            flags = vllm.flags(p)  # refuses what vLLM cannot run, in its sentence
        except UserError as exc:
            raise UserError(f"the {pool} pool: {exc}") from None
        per_pod = min(p.ngpus, p.scale_up_gpus or p.ngpus)
        if p.ngpus % per_pod:
            raise UserError(f"the {pool} worker's {p.ngpus} GPUs are not whole nodes of {per_pod}")
        note = p.note("mem_total_gib", "prefill_ms" if pool == "prefill" else "decode_step_ms")
        lines += [
            f"    {SERVICES[pool]}:",
            "      componentType: worker",
            f"      subComponentType: {pool}",
            f"      replicas: {replicas[pool]}  # {replicas[pool]} x {p.ngpus} = {replicas[pool] * p.ngpus} {plural(replicas[pool] * p.ngpus, 'GPU')}; "
            + p.note("throughput_tokens_per_s"),
        ]
        if per_pod < p.ngpus:
            lines += [
                "      multinode:",
                f"        nodeCount: {p.ngpus // per_pod}  # {per_pod} {plural(per_pod, 'GPU')} per node",
            ]
        lines += [
            "      resources:",
            "        limits:",
            f"          gpu: {_quote(per_pod)}  # {note}",
            "      extraPodSpec:",
            "        mainContainer:",
            f"          image: {IMAGE}",
            "          workingDir: /workspace/examples/backends/vllm",
            "          command: [python3, -m, dynamo.vllm]",
            "          args:",
            "            - --model",
            "            - ${MODEL}",
            f"            - {ROLE_FLAG[pool]}",
        ]
        for flag, value, comment in flags:
            tail = f"  # {comment}" if comment else ""
            if value is True:
                lines.append(f"            - {flag}{tail}")
            else:
                lines += [f"            - {flag}", f"            - {_quote(value)}{tail}"]
    return "\n".join(lines) + "\n"


def parse_pools(text: str) -> dict[str, tuple[dict, int]]:
    """{pool: (pinned overrides of one worker, replicas)} from a DynamoGraphDeployment with vLLM
    prefill and decode workers (an export or a manifest written by hand)."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"the file is not YAML Kubernetes can read ({str(exc).splitlines()[0]})") from None
    services = (doc or {}).get("spec", {}).get("services", {}) if isinstance(doc, dict) else {}
    head = header_fields(text)
    shape = re.search(r"input_len \d+, output_len \d+", text)
    out = {}
    for spec in services.values():
        pool = spec.get("subComponentType") if isinstance(spec, dict) else None
        if pool not in ROLE_FLAG:
            continue
        args = spec.get("extraPodSpec", {}).get("mainContainer", {}).get("args", [])
        line = " ".join(f"'{a}'" for a in map(str, args)) + (f"\n# {shape.group(0)}" if shape else "")
        pinned = vllm.parse(line)
        pinned.pop("workload", None)
        lead = {"workload": "inference", **{k: head[k] for k in ("model", "hardware") if k in head}}
        out[pool] = ({**lead, **pinned}, int(spec.get("replicas", 1)))
    if set(out) != set(ROLE_FLAG):
        raise UserError("the manifest has no prefill and decode worker (subComponentType prefill, decode)")
    return out


def parse(text: str, ngpus: int | None = None, layers: int | None = None) -> dict:
    """One layout cannot be read from two pools: import-run prints each pool (parse_pools)."""
    raise UserError("a Dynamo manifest holds two layouts; import-run prints both (parse_pools)")

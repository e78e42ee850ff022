"""Collective communication cost: alpha-beta model over a two-tier topology (scale-up, scale-out).

Notation (`formulas.md`, Collectives): n ranks, S bytes of the full buffer, beta achievable
bandwidth per rank per direction (GB/s = 1e9 B/s), alpha latency per step (us).

  collective            ring time                              nccl-tests busbw factor
  all_reduce            2(n-1)·alpha + 2(n-1)/n · S/beta        2(n-1)/n
  reduce_scatter        (n-1)·alpha + (n-1)/n · S/beta          (n-1)/n
  all_gather            (n-1)·alpha + (n-1)/n · S/beta          (n-1)/n
  all_to_all            (n-1)·alpha + (n-1)/n · S/beta          (n-1)/n
  broadcast, reduce     S/beta + (n-1)·alpha (pipelined ring)   1
                        tree: log2(n)·(alpha + S/beta) (binary tree, unpipelined)
  send_recv             alpha + S/beta                          1
  parameter_server      2·alpha + 2·n·S/beta  (server link carries n·S in and n·S out)
  all_reduce, tree      2·log2(n)·alpha + 2·S/beta  (NCCL double binary tree, pipelined)
  all_gather / reduce_scatter, pat   ceil(log2 n)·alpha + (n-1)/n · S/beta  (NCCL >= 2.23 PAT,
                        Parallel Aggregated Trees: one rank per node, logarithmic steps)
  hierarchical AR       intra reduce-scatter + inter all-reduce of S/n_local + intra all-gather

Every call of every kind (n > 1) adds a fixed launch_us, paid once per call: the kernel launch and
the flag synchronisation between ranks that NCCL's LL protocol needs before the first step, for
all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce and send/recv alike (each
is one NCCL kernel; send/recv too: sendrecv_perf has a microseconds floor like the collectives).
A hierarchical all-reduce is one NCCL call, so it pays it once, not per tier. The hardware-aware
entry points (`group_collective_time_s`, collective_ops) pass hw.scale_up.collective_launch_us.

S is always the full buffer: the all-reduced tensor, the gathered output of an all-gather, the
input of a reduce-scatter, the bytes one rank holds before an all-to-all. busbw = algbw·factor
with algbw = S / time (nccl-tests PERFORMANCE.md), so `busbw == beta` for large S on a ring.

Topology (`group_link`): ranks are numbered in Megatron order (TP fastest, then CP, then DP with
EP inside DP×CP, PP slowest); a group of `size` ranks `stride` apart spans size·stride
consecutive ranks, so it stays inside one scale-up domain iff size·stride <= domain_size.
A group that leaves the domain runs NCCL's rail-aligned rings: each of the k = domain/stride
members a domain holds drives its own NIC, so a ring is limited per rank by
min(scale-up, k · scale-out-per-GPU). This reproduces the 64-GPU H100 all-reduce busbw
(366–387 GB/s measured vs 8 NICs x 50 GB/s x 0.94). An all-to-all cannot aggregate NICs: each
rank pushes (n-k)/n of its buffer over its own NIC.

Protocols (`protocol_ring_time_s`, inside one scale-up domain; hardware file `scale_up.protocols`):
NCCL runs a ring in one of three protocols and its tuner (src/graph/tuning.cc) takes the one it
times fastest, each with its own latencies and share of the link:

  protocol   time of one call                                  where it wins (8-rank H100 all-reduce)
  LL         collective_launch_us + steps · latency_us          below ~6 MiB: 8-byte stores, 4 bytes
               + factor · S / (ll_bandwidth_fraction · β)       of them flag, so half the bandwidth
  LL128      ll128_launch_us + steps · ll128_step_us            ~6-35 MiB: 120 of each 128 bytes data
               + factor · S / (ll128_bandwidth_fraction · β)
  Simple     simple_launch_us + steps · simple_step_us          above: the whole bandwidth, a fence and
               + factor · S / (simple_bandwidth_fraction · β)   flag per chunk (the largest latency)

steps and factor are the ring's (2(n-1) and 2(n-1)/n for an all-reduce, n-1 and (n-1)/n for an
all-gather or reduce-scatter), β the group's achievable bandwidth (`group_link`). LL is the base
protocol fitted on small all-reduces (below); LL128's and Simple's latencies and all three fractions are
NCCL's constants (v2.23.4 to v2.30.7: baseLatencies and hwLatencies[NVLINK] of the ring, busBw · .5 and
· 0.92), stated in each NVLink hardware file. Send/recv (point-to-point) and fabrics without `protocols` keep one protocol:
the base at the whole bandwidth. A group spanning domains runs each protocol too (`spanning_protocols`): its
ring's N-1 (all-reduce 2(N-1)) steps that cross a NIC (N domains) at NCCL's NET step (hwLatencies[NET][Ring]: LL
the base scale_out.latency_us, LL128 4.0, Simple 14.0 us; protocols.ll128_net_step_us, simple_net_step_us), the
other steps at the protocol's scale-up step, the protocol's fraction of both tiers' bandwidth; its tree, PAT and
hierarchical all-reduce take the same launch, steps and fraction. Before, those ran LL's latency at the whole
bandwidth, so a 16-rank H100 all-reduce over two nodes read more busbw than the 8-rank one inside a node at 4-16
MiB (144 / 183 / 228 GB/s against 137 / 173 / 227); now 110 / 163 / 214. Twice β halves every
protocol's bandwidth term: a call of S bytes then costs what S/2 cost before.

All-to-all (`all_to_all_time_s`, inside one scale-up domain; hardware file `scale_up.all_to_all`): NCCL
runs it as one group of send/recv to every peer at once, not a ring: one call's latency, not n-1 steps,
in Simple above NCCL_P2P_LL_THRESHOLD bytes per peer (16 KiB), so

  S / n >  ll_threshold_bytes:  all_to_all.launch_us + (n-1)/n · S / (all_to_all.bandwidth_fraction · β)
  S / n <= ll_threshold_bytes:  the base (collective_launch_us + (n-1) · latency_us + (n-1)/n · S / β)

launch_us and bandwidth_fraction fitted per accelerator on nccl-tests alltoall_perf (aiconfigurator's
tables, tests/data/collectives_nccl_alltoall.csv, 256 KiB-512 MiB at 2, 4, 8 ranks): mean |time error|
H100 6 %, H200 6 %, B200 9 %, A100 13 % (the ring of n-1 steps at the whole β: 33, 31, 36, 35 %, every
size too fast). A file without `all_to_all` keeps the base.

NVLS (`nvls_all_reduce_time_s`, all-reduce inside a domain whose switch reduces; hardware file
`scale_up.nvls`): NCCL's NVLS algorithm reduces in the NVSwitch (multimem.ld_reduce) and multicasts the
result (multimem.st), one call rather than 2(n-1) ring steps; per GPU and direction it moves S + S/n bytes:

  nvls.launch_us + (1 + 1/n) · S / (nvls.bandwidth_fraction · β)

bandwidth_fraction is NCCL's nvlsEfficiency (src/graph/tuning.cc v2.29.2: 0.85 Hopper, 0.74 Blackwell),
taken on β as `group_link` gives it, i.e. after efficiency.scale_up (0.80 of 450 GB/s on H100): NCCL applies
it to its own per-channel bandwidths, so here the product (0.68 of the nominal link) is what the measured
1-8 GiB points below check, not NCCL's constant alone;
launch_us is fitted per accelerator on aiconfigurator's 8-rank all_reduce_perf times at 32-512 MiB (H100
78.4 us, H200 73.3; mean |time error| 1.5, 0.4 %; NCCL's own tuner latency, 25 us, is too short for these
measurements). B200 and B300 have no `nvls`: fitted alike (110.7 / 108.2 us at 0.74) it loses to their
ring at 0.8 of 900 GB/s, which already reads -4..+2 % at 128-512 MiB and -22 % at 64 MiB (8 ranks;
tests/data/collectives_nccl_large.csv): the Blackwell ring is what is off (2 ranks -25 %), not NVLS. The faster of the ring protocols and NVLS is taken,
as NCCL's tuner takes it. The (1 + 1/n) traffic makes NVLS lose to the ring at 2 ranks and tie at 4
(1.2 · 0.85 ≈ 1: measured 4-rank H100 busbw levels off at ~350 GB/s, as the ring's 360), win at 8.

Efficiency is applied HERE, in `group_link` (hw.efficiency.scale_up / scale_out multiply the
nominal per-direction bandwidths); `collective_time_s` takes the achievable bandwidth as given.

Calibration (`shared/reference/collectives_measured.csv`, H100 SXM, nccl-tests busbw):
  scale_up 0.80: 450 GB/s NVLink4 -> 360 GB/s, the maintainer's expected large all_gather and
    non-NVLS all_reduce busbw (nccl-tests issue 326). NVLS all-reduce measured 362-480 GB/s at
    64 MiB-8 GiB: `nvls_all_reduce_time_s` (below) gives 361 / 395 / 467 / 476 at 64 MiB / 128 MiB / 1 GiB /
    8 GiB (the ring alone: 307 at 64 MiB, 23-25 % under at 1-8 GiB).
  scale_out 0.94: 47 GB/s ring busbw per NDR NIC (issue 290), 24/25 per HDR NIC (issue 160).
    64-GPU IB all-reduce (8 nodes, SHARP) 1 GiB / 8 GiB: model 344 / 356 GB/s busbw vs
    365.9 / 386.6 measured (-5.9 % / -8.0 %; the ring is NVLink-bound at 0.8·450 = 360 < 8·47; in Simple,
    whose 14 us NET steps make 1 GiB 1.8 points slower than LL's 5 us at the whole bandwidth did).
  scale_up latency: alpha(n) = collective_launch_us + latency_us · steps, fitted on H100
    NVLink4/NVSwitch from two small all-reduces (ring, 2(n-1) steps; hardware/h100-sxm-80gb.yaml):
    2 ranks ~6 us (NCCL issue 1259) and 8 ranks 13 us (dgxh100-ar-small): launch 4.83 us +
    0.583 us per step reproduces both (the earlier 1.0 us per step and no launch gave 2 us and
    14 us: TP2 decode all-reduces 3x too cheap).
  mid sizes (Protocols above): at 8 MiB (LL128) the model gives 173 GB/s busbw vs 177 measured (-2 %;
    268 with one protocol, +52 %); at 64 MiB 361 vs 362 in NVLS (the ring in Simple: 307, -15 %;
    one protocol gave 345, -4.6 %, by leaving out Simple's latency). Against
    aiconfigurator's nccl-tests tables (tests/data/collectives_nccl_sizes.csv: all-reduce, all-gather,
    reduce-scatter at 2, 4, 8 ranks, 256 KiB-32 MiB) the mean |time error| over the 8-rank points is
    H100 10 %, H200 12 %, B200 15 % (17 % on H100's latencies), A100 14 % (one protocol: 28, 30, 22, 46 %, every one too fast on
    the whole; A100 27 % on H100's small-message latencies, now its own from the same tables:
    hardware/a100-sxm-80gb.yaml); at 2 ranks the model stays ~25 % fast (large 2-rank busbw is ~260-320 GB/s, not 360).
  `group_collective_time_s(algorithm="auto")` takes the faster of ring and tree for groups that
  span domains, as NCCL's tuner does (ring inside a domain), and of ring and PAT for all-gather /
  reduce-scatter groups with one rank per domain (NCCL 2.23+ restricts PAT to one GPU per node).
  `tests/test_collectives.py` asserts these errors.
"""

from __future__ import annotations

import numpy as np

from ..units import GB, US

KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "send_recv",
    "broadcast",
    "reduce",
    "parameter_server",
)
ALGORITHMS = ("ring", "tree", "pat", "hierarchical", "auto")


def busbw_factor(kind: str, size):
    """nccl-tests bus-bandwidth factor: busbw = algbw · factor (algbw = S / time)."""
    n = np.asarray(size, dtype=np.float64)
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if kind in ("send_recv", "broadcast", "reduce", "parameter_server"):
        return np.ones_like(n)
    raise ValueError(f"unknown collective kind {kind!r}; known: {', '.join(KINDS)}")


def busbw_gbps(kind: str, nbytes, size, time_s):
    """Bus bandwidth (GB/s) of a measured or modelled collective, nccl-tests convention."""
    return np.asarray(nbytes, dtype=np.float64) / np.asarray(time_s, dtype=np.float64) / GB * busbw_factor(kind, size)


def scale_up_group_gbps(hw, members):
    """Per-rank, per-direction scale-up bandwidth (efficiency applied) of a group with `members`
    ranks in one domain. switch: the whole port. mesh (fully connected links): the m − 1 links to
    the other members, (m − 1)/(domain_size − 1) of the port; a lone member (m <= 1) uses no
    scale-up link and is not capped by one."""
    up = hw.scale_up.bandwidth_gbps * hw.efficiency.scale_up
    m = np.asarray(members, dtype=np.float64)
    if hw.scale_up.topology == "switch":
        return np.full(m.shape, up)
    links = max(hw.scale_up.domain_size - 1, 1)
    return np.where(m > 1, up * np.clip(m - 1.0, 1.0, links) / links, up)


def group_link(hw, size, stride, kind: str = "ring"):
    """Achievable (bandwidth_gbps per rank per direction, latency_us per step) of a group.

    `size` ranks, `stride` ranks apart in Megatron order (TP 1, CP tp, DP tp·cp, PP tp·cp·dp);
    arrays broadcast. Inside the domain (size·stride <= domain_size): scale_up · eff.scale_up
    (a mesh: the share of its links the group uses, `scale_up_group_gbps`).
    Spanning domains: rings run one per NIC rail, min(scale_up·eff, k·scale_out·eff) with k =
    members per domain = clip(domain // stride, 1, size); pass kind="all_to_all" for the
    all-to-all bound, scale_out·eff·(n-1)/(n-k) (each rank's own NIC carries (n-k)/n of S).
    Efficiency is applied here (module docstring). size 1 returns the scale-up link (unused).
    """
    size = np.asarray(size, dtype=np.float64)
    stride = np.asarray(stride, dtype=np.float64)
    eff = hw.efficiency
    domain = hw.scale_up.domain_size
    inside = size * stride <= domain
    up_bw = scale_up_group_gbps(hw, np.broadcast_to(size, inside.shape))  # all members in one domain
    if hw.scale_out is None:
        # No scale-out tier: the grid drops such layouts; keep the scale-up link for safety.
        return up_bw, group_latency_us(hw, size, stride)
    out_bw = hw.scale_out.bandwidth_gbps * eff.scale_out
    k = np.clip(np.floor(domain / stride), 1.0, np.maximum(size, 1.0))
    up_k = scale_up_group_gbps(hw, k)  # the k members of each domain
    if kind == "all_to_all":
        spans = np.minimum(out_bw * (size - 1) / np.maximum(size - k, 1.0), up_k)
    else:
        spans = np.minimum(up_k, k * out_bw)
    bw = np.where(inside, up_bw, spans)
    return bw, group_latency_us(hw, size, stride)


def group_latency_us(hw, size, stride):
    """The latency per step of `group_link`: scale_up.latency_us inside the domain (size·stride <=
    domain_size), scale_out.latency_us spanning domains (and scale-up alone without a scale-out tier)."""
    inside = np.asarray(size, dtype=np.float64) * np.asarray(stride, dtype=np.float64) <= hw.scale_up.domain_size
    if hw.scale_out is None:
        return np.full(inside.shape, hw.scale_up.latency_us)
    return np.where(inside, hw.scale_up.latency_us, hw.scale_out.latency_us)


def collective_time_s(
    kind: str,
    nbytes,
    size,
    bandwidth_gbps,
    latency_us,
    algorithm: str = "ring",
    *,
    local_size=None,
    inner_bandwidth_gbps=None,
    inner_latency_us=None,
    launch_us=0.0,
):
    """Seconds for one collective (module docstring table) plus `launch_us` once per call (module
    docstring; 0 gives the bare alpha-beta formula); arrays broadcast; size 1 costs 0.

    `bandwidth_gbps` is the achievable per-rank per-direction bandwidth (see `group_link`).
    algorithm: ring | tree (all_reduce, broadcast, reduce; others fall back to ring) | auto
    (the faster of ring and tree, NCCL's tuner) |
    hierarchical (all_reduce only; needs local_size and the inner link, see
    `hierarchical_all_reduce_time_s`; bandwidth/latency are then the outer tier).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown collective kind {kind!r}; known: {', '.join(KINDS)}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    S = np.asarray(nbytes, dtype=np.float64)
    n = np.asarray(size, dtype=np.float64)
    beta = np.asarray(bandwidth_gbps, dtype=np.float64) * GB
    alpha = np.asarray(latency_us, dtype=np.float64) * US
    if algorithm == "hierarchical":
        if kind != "all_reduce" or local_size is None:
            raise ValueError("hierarchical needs kind='all_reduce' and local_size/inner link")
        t = hierarchical_all_reduce_time_s(
            S, n, local_size, inner_bandwidth_gbps, inner_latency_us, bandwidth_gbps, latency_us
        )
        return np.where(n > 1, t + np.asarray(launch_us, dtype=np.float64) * US, 0.0)
    if algorithm == "auto":
        ring = collective_time_s(kind, S, n, bandwidth_gbps, latency_us, "ring", launch_us=launch_us)
        return np.minimum(ring, collective_time_s(kind, S, n, bandwidth_gbps, latency_us, "tree", launch_us=launch_us))
    frac = (n - 1) / np.maximum(n, 1.0)
    if kind == "all_reduce":
        t = (2 * _log2(n) * alpha + 2 * S / beta) if algorithm == "tree" else 2 * (n - 1) * alpha + 2 * frac * S / beta
    elif kind in ("all_gather", "reduce_scatter") and algorithm == "pat":
        t = np.ceil(_log2(n)) * alpha + frac * S / beta
    elif kind in ("all_gather", "reduce_scatter", "all_to_all"):
        t = (n - 1) * alpha + frac * S / beta
    elif kind in ("broadcast", "reduce"):
        t = _log2(n) * (alpha + S / beta) if algorithm == "tree" else S / beta + (n - 1) * alpha
    elif kind == "send_recv":
        t = alpha + S / beta + 0.0 * n
    else:  # parameter_server
        t = 2 * alpha + 2 * n * S / beta
    return np.where(n > 1, t + np.asarray(launch_us, dtype=np.float64) * US, 0.0)


def _log2(n):
    """log2(n) of a group of n ranks (n >= 1), the steps of a tree or PAT: computed only in their
    branches of `collective_time_s`, not for the ring's n - 1 steps."""
    return np.log2(np.maximum(n, 1.0))


def hierarchical_all_reduce_time_s(
    nbytes,
    size,
    local_size,
    inner_bandwidth_gbps,
    inner_latency_us,
    outer_bandwidth_gbps,
    outer_latency_us,
    outer_algorithm: str = "ring",
):
    """All-reduce of S over `size` ranks in nodes of `local_size`: reduce-scatter S inside the
    node, all-reduce S/local_size across size/local_size nodes (each rank on its own NIC;
    `outer_algorithm` ring, tree or auto), then all-gather S inside the node (`formulas.md`).
    Bandwidths are achievable per rank per direction."""
    S = np.asarray(nbytes, dtype=np.float64)
    n = np.asarray(size, dtype=np.float64)
    k = np.minimum(np.asarray(local_size, dtype=np.float64), n)
    nodes = n / k
    rs = collective_time_s("reduce_scatter", S, k, inner_bandwidth_gbps, inner_latency_us)
    ar = collective_time_s("all_reduce", S / k, nodes, outer_bandwidth_gbps, outer_latency_us, outer_algorithm)
    ag = collective_time_s("all_gather", S, k, inner_bandwidth_gbps, inner_latency_us)
    return np.where(n > 1, rs + ar + ag, 0.0)


def cross_domain_all_reduce_time_s(hw, nbytes, size, stride):
    """One all-reduce of S over a group that spans scale-up domains, hierarchically (NCCL's tree:
    an intra-node chain under an inter-node tree), k = members per domain, N = size/k domains:

      reduce-scatter S over the k members   (k−1)·α_up  + (k−1)/k · S / β_up(k)
      all-reduce S/k over N domains         each member on its own NIC (rail), ring or tree,
                                            whichever is faster (NCCL's tuner): ring
                                            2(N−1)·α_out + 2(N−1)/N · (S/k) / β_out, tree
                                            2·log2(N)·α_out + 2 · (S/k) / β_out
      all-gather S over the k members       (k−1)·α_up  + (k−1)/k · S / β_up(k)
      + one collective_launch_us (one NCCL call)

    Per rank the NIC carries 2(N−1)/N · S/k each way: the nccl-tests busbw rule of an all-reduce
    over N ranks applied to the 1/k shard (PERFORMANCE.md). β_up(k) = `scale_up_group_gbps(k)`,
    β_out = scale_out · eff.scale_out, α from the hardware file. Latency-bound (decode-sized S) it
    beats the flat ring's 2(n−1) steps on the NIC; bandwidth-bound the ring
    (`group_link`, NVLink-bound at min(β_up, k·β_out)) is faster and `group_collective_time_s`
    takes the smaller. A group with one member per domain (k = 1) is the inter-node all-reduce alone."""
    n = np.asarray(size, dtype=np.float64)
    stride = np.asarray(stride, dtype=np.float64)
    domain = hw.scale_up.domain_size
    k = np.clip(np.floor(domain / stride), 1.0, np.maximum(n, 1.0))
    inner = scale_up_group_gbps(hw, k)
    outer = hw.scale_out.bandwidth_gbps * hw.efficiency.scale_out
    t = hierarchical_all_reduce_time_s(
        nbytes, n, k, inner, hw.scale_up.latency_us, outer, hw.scale_out.latency_us, outer_algorithm="auto"
    )
    return np.where(n > 1, t + hw.scale_up.collective_launch_us * US, 0.0)


def cross_domain_all_reduce_nic_s(hw, nbytes, size, stride):
    """The part of `cross_domain_all_reduce_time_s` on the NIC: its inter-node all-reduce of S/k
    over N domains (the same term); the reduce-scatter, the all-gather and the launch run in the
    node, on the scale-up port (cost/links.py splits the call's busy seconds so)."""
    n = np.asarray(size, dtype=np.float64)
    stride = np.asarray(stride, dtype=np.float64)
    k = np.minimum(np.clip(np.floor(hw.scale_up.domain_size / stride), 1.0, np.maximum(n, 1.0)), n)
    outer = hw.scale_out.bandwidth_gbps * hw.efficiency.scale_out
    S = np.asarray(nbytes, dtype=np.float64)
    ar = collective_time_s("all_reduce", S / k, n / k, outer, hw.scale_out.latency_us, "auto")
    return np.where(n > 1, ar, 0.0)


# Ring collectives NCCL runs in its LL / LL128 / Simple protocols (all-to-all and send/recv are
# point-to-point transfers that its tuner does not time so: all-to-all has its own, `all_to_all_time_s`)
PROTOCOL_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")


def scale_up_protocols(hw):
    """(launch_us, step_us, bandwidth_fraction) of each protocol a ring inside the scale-up domain may
    run in: LL, the base (collective_launch_us, latency_us, protocols.ll_bandwidth_fraction), then
    LL128 and Simple (hw.scale_up.protocols); the base alone at the whole bandwidth without `protocols`."""
    up = hw.scale_up
    p = up.protocols
    if p is None:
        return ((up.collective_launch_us, up.latency_us, 1.0),)
    return (
        (up.collective_launch_us, up.latency_us, p.ll_bandwidth_fraction),
        (p.ll128_launch_us, p.ll128_step_us, p.ll128_bandwidth_fraction),
        (p.simple_launch_us, p.simple_step_us, p.simple_bandwidth_fraction),
    )


def protocol_ring_time_s(hw, kind: str, nbytes, size, bandwidth_gbps):
    """Seconds of a ring collective inside the scale-up domain as NCCL's tuner times it (module
    docstring, Protocols): the fastest over `scale_up_protocols` of

        launch_p + steps · step_p + factor · S / (fraction_p · β)

    (the ring rows of the module table; β = `bandwidth_gbps`, the group's achievable bandwidth). Kinds
    outside PROTOCOL_KINDS, and a hardware file without `protocols`, run the base protocol at full
    bandwidth: `collective_time_s` with collective_launch_us and latency_us, as before protocols."""
    protos = scale_up_protocols(hw)
    if kind not in PROTOCOL_KINDS or len(protos) == 1:
        up = hw.scale_up
        return collective_time_s(
            kind, nbytes, size, bandwidth_gbps, up.latency_us, "ring", launch_us=up.collective_launch_us
        )
    bw = np.asarray(bandwidth_gbps, dtype=np.float64)
    times = [
        collective_time_s(kind, nbytes, size, bw * f, step, "ring", launch_us=launch) for launch, step, f in protos
    ]
    return np.minimum.reduce(np.broadcast_arrays(*times))


def all_to_all_time_s(hw, nbytes, size, bandwidth_gbps, latency_us):
    """Seconds of an all-to-all of S bytes per rank inside the scale-up domain (module docstring, All-to-all):
    with hw.scale_up.all_to_all, above `ll_threshold_bytes` per peer (S/n)

        launch_us + (n-1)/n · S / (bandwidth_fraction · β)

    (every peer at once: one latency), at and below it, and without `all_to_all`, the base protocol
    (`collective_time_s`: collective_launch_us + (n-1) · latency_us + (n-1)/n · S/β)."""
    up = hw.scale_up
    base = collective_time_s(
        "all_to_all", nbytes, size, bandwidth_gbps, latency_us, "ring", launch_us=up.collective_launch_us
    )
    a2a = up.all_to_all
    if a2a is None:
        return base
    n = np.asarray(size, dtype=np.float64)
    S = np.asarray(nbytes, dtype=np.float64)
    bw = np.asarray(bandwidth_gbps, dtype=np.float64) * a2a.bandwidth_fraction
    simple = collective_time_s("all_to_all", S, n, bw, 0.0, "ring", launch_us=a2a.launch_us)
    return np.where(S / np.maximum(n, 1.0) > a2a.ll_threshold_bytes, simple, base)


def nvls_all_reduce_time_s(hw, nbytes, size, bandwidth_gbps):
    """Seconds of an NVLink SHARP all-reduce of S bytes over n ranks of one switch (module docstring, NVLS):

        nvls.launch_us + (1 + 1/n) · S / (nvls.bandwidth_fraction · β)

    Per GPU and direction the switch path moves S + S/n bytes: multimem.ld_reduce pulls each rank's 1/n
    shard reduced from all n GPUs (every GPU serves S out, takes S/n in), multimem.st multicasts it back
    (S/n out, S in). inf where the hardware file has no `nvls` (the ring then wins every `minimum`)."""
    nv = hw.scale_up.nvls
    n = np.asarray(size, dtype=np.float64)
    S = np.asarray(nbytes, dtype=np.float64)
    bw = np.asarray(bandwidth_gbps, dtype=np.float64)
    if nv is None:
        return np.full(np.broadcast_shapes(S.shape, n.shape, bw.shape), np.inf)
    t = nv.launch_us * US + (1.0 + 1.0 / np.maximum(n, 1.0)) * S / (nv.bandwidth_fraction * bw * GB)
    return np.where(n > 1, t, 0.0)


def group_collective_time_s(hw, kind: str, nbytes, size, stride, algorithm: str = "auto", hierarchical: bool = False):
    """`collective_time_s` over the link `group_link(hw, size, stride)` gives.

    Each call pays hw.scale_up.collective_launch_us once (module docstring).
    algorithm="auto": inside the scale-up domain a ring (NCCL's intra-node tree is a chain, no
    log2 latency) in the fastest of the fabric's protocols (`protocol_ring_time_s`); for groups
    spanning domains the faster of ring and tree (NCCL's tuner), and with `hierarchical` an
    all-reduce may also run as `cross_domain_all_reduce_time_s`; on a fabric with `protocols` each of those
    runs in each of LL, LL128 and Simple (`spanning_protocols`: the protocol's launch, its scale-up step, NCCL's
    NET step, its share of both tiers' bandwidth) with the ring's steps priced per segment, and the fastest is
    taken (module docstring, Protocols). An explicit algorithm is the bare `collective_time_s` (base protocol)
    on that link.
    """
    bw, lat = group_link(hw, size, stride, kind="all_to_all" if kind == "all_to_all" else "ring")
    launch = hw.scale_up.collective_launch_us
    if algorithm != "auto":
        return collective_time_s(kind, nbytes, size, bw, lat, algorithm, launch_us=launch)
    spans = np.asarray(size) * np.asarray(stride) > hw.scale_up.domain_size
    if kind in PROTOCOL_KINDS and hw.scale_up.protocols is not None and hw.scale_out is not None and np.any(spans):
        # the rows inside the domain (none: every row is `across`'s)
        inside = 0.0 if np.all(spans) else _inside_time_s(hw, kind, nbytes, size, bw, lat)
        across = np.minimum.reduce(
            np.broadcast_arrays(
                *(
                    _spanning_time_s(_protocol_hw(hw, *p), kind, nbytes, size, stride, bw * p[3], hierarchical)
                    for p in spanning_protocols(hw)
                )
            )
        )
        return np.where(spans, across, inside)
    return _spanning_or_inside(hw, kind, nbytes, size, stride, bw, lat, hierarchical)


def cross_domain_all_reduce_split_s(hw, nbytes, size, stride):
    """(seconds, NIC seconds) of `cross_domain_all_reduce_time_s` in the protocol that makes it fastest
    (`spanning_protocols`; the base alone on a fabric without `protocols`): the time and, of it, the
    inter-node all-reduce (`cross_domain_all_reduce_nic_s`) in that same protocol."""
    if hw.scale_up.protocols is None:
        return cross_domain_all_reduce_time_s(hw, nbytes, size, stride), cross_domain_all_reduce_nic_s(
            hw, nbytes, size, stride
        )
    hws = [_protocol_hw(hw, *p) for p in spanning_protocols(hw)]
    times = np.stack(np.broadcast_arrays(*(cross_domain_all_reduce_time_s(h, nbytes, size, stride) for h in hws)))
    nics = np.stack(np.broadcast_arrays(*(cross_domain_all_reduce_nic_s(h, nbytes, size, stride) for h in hws)))
    best = np.argmin(times, axis=0)
    return np.take_along_axis(times, best[None], 0)[0], np.take_along_axis(nics, best[None], 0)[0]


def spanning_protocols(hw):
    """(launch_us, scale-up step_us, scale-out step_us, bandwidth_fraction) of each protocol a collective spanning
    domains may run in: LL (collective_launch_us, latency_us, scale_out.latency_us, ll fraction), LL128 and Simple
    with their scale-up constants and NCCL's NET ring step latencies (protocols.ll128_net_step_us, simple_net_step_us)."""
    up, p = hw.scale_up, hw.scale_up.protocols
    return (
        (up.collective_launch_us, up.latency_us, hw.scale_out.latency_us, p.ll_bandwidth_fraction),
        (p.ll128_launch_us, p.ll128_step_us, p.ll128_net_step_us, p.ll128_bandwidth_fraction),
        (p.simple_launch_us, p.simple_step_us, p.simple_net_step_us, p.simple_bandwidth_fraction),
    )


def _protocol_hw(hw, launch_us, step_us, net_step_us, fraction):
    """`hw` as one protocol sees it: its launch and step latencies, its share of both tiers' bandwidth."""
    eff = hw.efficiency.model_copy(
        update={"scale_up": hw.efficiency.scale_up * fraction, "scale_out": hw.efficiency.scale_out * fraction}
    )
    up = hw.scale_up.model_copy(update={"collective_launch_us": launch_us, "latency_us": step_us, "protocols": None})
    out = hw.scale_out.model_copy(update={"latency_us": net_step_us})
    return hw.model_copy(update={"scale_up": up, "scale_out": out, "efficiency": eff})


def _spanning_time_s(hw, kind, nbytes, size, stride, bw, hierarchical):
    """A collective over a group spanning domains in one protocol (`hw` from `_protocol_hw`): the ring with its
    steps per segment (the (n-1) or 2(n-1) steps less the N-1 or 2(N-1) that cross a NIC at the scale-up step,
    those at the scale-out step; N = domains spanned), or the tree / PAT / hierarchical all-reduce."""
    n = np.asarray(size, dtype=np.float64)
    k = np.clip(np.floor(hw.scale_up.domain_size / np.asarray(stride, dtype=np.float64)), 1.0, np.maximum(n, 1.0))
    domains = n / k
    return _spanning_best(hw, kind, nbytes, size, stride, bw, group_latency_us(hw, size, stride), hierarchical, domains)


def _spanning_best(hw, kind, nbytes, size, stride, bw, lat, hierarchical, domains=None):
    """Every row priced as a group spanning domains on one (bandwidth, latency) link: the fastest of ring,
    tree, PAT and hierarchical; with `domains` (N) the ring's steps are priced per segment: N-1 (2(N-1) for
    an all-reduce) at scale_out.latency_us, the rest at scale_up.latency_us."""
    launch = hw.scale_up.collective_launch_us
    if domains is None:
        ring = collective_time_s(kind, nbytes, size, bw, lat, "ring", launch_us=launch)
    else:
        n = np.asarray(size, dtype=np.float64)
        steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
        net = 2 * (domains - 1) if kind == "all_reduce" else domains - 1
        seg_lat = (net * hw.scale_out.latency_us + (steps - net) * hw.scale_up.latency_us) / np.maximum(steps, 1.0)
        ring = collective_time_s(kind, nbytes, size, bw, seg_lat, "ring", launch_us=launch)
    spans = np.asarray(size) * np.asarray(stride) > hw.scale_up.domain_size
    best = np.minimum(ring, collective_time_s(kind, nbytes, size, bw, lat, "tree", launch_us=launch))
    if kind in ("all_gather", "reduce_scatter"):
        one_per_domain = np.asarray(stride, dtype=np.float64) >= hw.scale_up.domain_size
        if np.any(one_per_domain):  # PAT is a candidate only there
            pat = collective_time_s(kind, nbytes, size, bw, lat, "pat", launch_us=launch)
            best = np.where(one_per_domain, np.minimum(best, pat), best)
    if kind == "all_reduce" and hierarchical and hw.scale_out is not None and np.any(spans):
        best = np.minimum(best, cross_domain_all_reduce_time_s(hw, nbytes, size, stride))
    return best


def _spanning_or_inside(hw, kind, nbytes, size, stride, bw, lat, hierarchical):
    """`group_collective_time_s` on one (bandwidth, latency) link: rows inside the domain `_inside_time_s`,
    rows spanning domains `_spanning_best`."""
    spans = np.asarray(size) * np.asarray(stride) > hw.scale_up.domain_size
    best = _spanning_best(hw, kind, nbytes, size, stride, bw, lat, hierarchical)
    return np.where(spans, best, _inside_time_s(hw, kind, nbytes, size, bw, lat))


def _inside_time_s(hw, kind, nbytes, size, bw, lat):
    """Every row priced as a group inside the scale-up domain on one (bandwidth, latency) link: a ring in
    the fastest of its protocols and NVLS (all-to-all: `all_to_all_time_s`)."""
    if kind == "all_to_all":
        return all_to_all_time_s(hw, nbytes, size, bw, lat)
    inside = protocol_ring_time_s(hw, kind, nbytes, size, bw)
    if kind == "all_reduce" and hw.scale_up.nvls is not None:
        inside = np.minimum(inside, nvls_all_reduce_time_s(hw, nbytes, size, bw))
    return inside


# A serving engine's own all-reduce kernel for tensor parallelism (vLLM's and SGLang's
# CustomAllreduce, TensorRT-LLM's AllReduce plugin ONESHOT / TWOSHOT): every rank maps its peers'
# buffers over NVLink P2P (CUDA IPC) and reduces with plain loads, one kernel and one or two
# barriers instead of NCCL's 2(n−1) ring steps. Stage choice as vLLM's csrc/custom_all_reduce.cuh
# `allreduce()` makes it: one-shot for 2 ranks, or below 512 KiB at up to 4 ranks, or below 256 KiB
# at up to 8; two-shot otherwise.
CUSTOM_AR_ONE_SHOT_MAX_BYTES = {4: 512.0 * 1024, 8: 256.0 * 1024}  # ranks <= key: one-shot below the bytes
# Largest group the kernel runs on (vLLM's custom_all_reduce.py _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]; a
# larger TP group, which only an NVLink Switch System gives, uses NCCL)
CUSTOM_AR_MAX_RANKS = 8


def custom_all_reduce_one_shot(nbytes, size):
    """Whether a custom all-reduce of S bytes over n ranks runs one-shot (CUSTOM_AR_ONE_SHOT_MAX_BYTES)."""
    S = np.asarray(nbytes, dtype=np.float64)
    n = np.asarray(size, dtype=np.float64)
    small4 = (n <= 4) & (S < CUSTOM_AR_ONE_SHOT_MAX_BYTES[4])
    small8 = (n <= 8) & (S < CUSTOM_AR_ONE_SHOT_MAX_BYTES[8])
    return (n <= 2) | small4 | small8


def custom_all_reduce_wire_factor(nbytes, size):
    """Bytes one rank reads from its peers per byte of S: one-shot reads every peer's whole buffer,
    (n−1); two-shot reduce-scatters (its 1/n slice from each of n−1 peers) then all-gathers (the
    other n−1 reduced slices), 2(n−1)/n, the ring's bytes in two barrier stages."""
    n = np.asarray(size, dtype=np.float64)
    return np.where(custom_all_reduce_one_shot(nbytes, size), n - 1.0, 2.0 * (n - 1.0) / np.maximum(n, 1.0))


def custom_all_reduce_time_s(hw, nbytes, size, one_shot_latency_us, two_shot_latency_us, link_efficiency):
    """Seconds of one engine custom all-reduce of S bytes over `size` ranks of one scale-up domain:
    the stage's fixed time (one-shot: one kernel, one barrier; two-shot: a second barrier between
    its reduce-scatter and all-gather halves; fitted per engine) + the bytes a rank reads from its
    peers (`custom_all_reduce_wire_factor` · S) at link_efficiency of the nominal scale-up
    bandwidth its group has (`scale_up_group_gbps` before hw.efficiency.scale_up, which is NCCL's
    fit). 0 for one rank."""
    S = np.asarray(nbytes, dtype=np.float64)
    n = np.asarray(size, dtype=np.float64)
    bw = scale_up_group_gbps(hw, n) / hw.efficiency.scale_up * link_efficiency * GB
    fixed = np.where(custom_all_reduce_one_shot(S, n), one_shot_latency_us, two_shot_latency_us) * US
    return np.where(n > 1, fixed + custom_all_reduce_wire_factor(S, n) * S / bw, 0.0)

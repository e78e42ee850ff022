"""Latency under load: a request-level simulation of continuous batching (issue 33, item 3).

`cost.inference_iteration` gives the MEAN TTFT and ITL of a closed loop of b sequences; this
module follows individual requests, so the percentiles (p50/p90/p99) and the goodput under an
SLO come out. It is a deterministic, iteration-stepped discrete-event simulation of one replica:

  arrivals   open loop: given arrival times (Poisson at workload.request_rate / dp, drawn by the
             caller with a seeded RNG, or a trace); closed loop: `concurrency` clients, each
             sending its next request when its previous one finishes (bench_serving
             --max-concurrency, LLMPerf's concurrent requests)
  admission  FCFS; at most `max_batch` sequences in flight (vLLM max_num_seqs, SGLang
             max_running_requests); a request is seen by the engine `request_overhead_s` after it
             is sent (tokenization, HTTP; the fitted eff.request_overhead_ms). Multi-step scheduling
             (`steps` > 1, vLLM 0.6's --num-scheduler-steps): decode-only iterations run in runs of
             `steps` per scheduler call and a prompt is admitted only between runs (a run cut short
             by every sequence finishing ends there)
  iteration  chunked prefill (vLLM V1, SGLang --chunked-prefill-size, TensorRT-LLM chunked
             context): every decoding sequence contributes one token; the prompts in flight, in
             admission order, fill the rest of the token budget C with chunks. Prefill priority
             (chunked_prefill=False, vLLM V0 / SGLang without mixed chunks): while prompt tokens wait,
             an iteration carries only prompt tokens (up to C) and the decoding sequences stall
  batch wait TensorRT-LLM's batch waiting (engine.batch_wait_*, cost/batch_wait.py): in an iteration
             whose budget gives prompts tokens while sequences decode, those prompts are held back
             (the iteration runs the decodes alone) until its prompt + decode tokens (1 + draft
             tokens per decoding sequence) reach
             batch_wait_ratio x C or batch_wait_iters iterations have been held; one counter for all
             (prompts arriving meanwhile join the held ones), reset when they run
  time       one iteration takes `times(decode tokens, prompt tokens)` seconds, a table evaluated
             by the per-iteration cost model (cost.iteration_table); the iteration's decode tokens
             and every prompt finished in it emit their token when it ends
  overlap    overlap scheduling (`overlap`, engine.overlap_scheduler): the first token of a prompt
             finished in iteration i is sent after cost.first_token.first_token_delay_s, the next
             iteration's seconds (when i+1 ends; at once when no iteration follows; without overlap
             scheduling, when computed), the rule the closed form takes too.
             Only TTFT moves: the tokens' gaps and the ITL are counted from when they were computed,
             and a closed-loop client whose one-token request ends while others run sends again when
             the token was computed (one iteration early)
Per request: TTFT = first token sent − sent; ITL = (finish − first token)/(output_len − 1), the mean gap
of that request (the TPOT that bench_serving and LLMPerf report per request; their p50/p90 are
percentiles of it over requests); e2e = finish − sent. Per token: every gap between two tokens of
a request (bench_serving's "ITL"; a prompt's pass that stalls the decodes shows in its tail).

Every request counts in the percentiles, the first ones (an empty engine) included, as the
benchmark tools count them. A closed loop of identical lengths stays in phase: its clients finish
together and send together, so every prompt queues behind the others' (1k/1k at 64 clients: mean
TTFT 0.83 s; with lengths ±10 % the phases drift apart and it is 0.13 s): give the lengths' spread
where the source has one.

Assumptions: the KV cache holds `max_batch` sequences (no preemption or swapping); the decode
context and the prompt's chunk attention are the cost model's means, not each request's; the
pipeline stages (pp > 1) pass an iteration as one unit. The loop is over iterations (sequential
by nature), each iteration vectorized over the sequences in flight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .batch_wait import holds, release, scheduled_tokens
from .first_token import first_token_delay_s

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class IterationTimes:
    """Seconds of one iteration by its decode tokens (row: 0, 1, ..., max_batch) and prompt tokens
    (`prompt_tokens`, ascending from 0; linear in between). seconds[0, 0] is never used."""

    prompt_tokens: np.ndarray  # (k,) tokens
    seconds: np.ndarray  # (max_batch + 1, k) seconds

    def __call__(self, decode_tokens: int, prompt_tokens: float) -> float:
        return float(np.interp(prompt_tokens, self.prompt_tokens, self.seconds[decode_tokens]))


@dataclass(frozen=True)
class Scheduler:
    max_batch: int  # sequences in flight per replica
    token_budget: int  # tokens per iteration, decode + prompt
    chunked_prefill: bool = True  # False: prefill priority, decodes stall while prompts wait
    steps: int = 1  # decode iterations per scheduler call (multi-step scheduling); admission between runs
    overlap: bool = False  # overlap scheduling: a prompt's first token is sent when the next iteration ends
    batch_wait_iters: int = 0  # batch waiting (cost/batch_wait.py): iterations a prompt may be held while others decode
    batch_wait_ratio: float = 0.0  # ... or until the iteration's tokens reach this share of token_budget
    draft_tokens: int = 0  # speculative decoding's draft tokens per decoding sequence and step (batch waiting's count)


@dataclass(frozen=True)
class Requests:
    """The simulated requests: lengths (tokens) and, for a trace that has them, send times (s)."""

    input_len: np.ndarray
    output_len: np.ndarray
    arrival_s: np.ndarray | None = None


def drawn_requests(wl, n: int, seed: int) -> Requests:
    """n requests of workload.length_dist: fixed lengths, or uniform integers in
    [max(1, round((1 − s)·L)), round((1 + s)·L)] (s = length_spread) drawn with `seed`."""
    if wl.length_dist == "fixed":
        return Requests(np.full(n, wl.input_len), np.full(n, wl.output_len))
    rng = np.random.default_rng([seed, 1])  # a stream apart from the arrivals'
    s = wl.length_spread

    def uniform(mean):
        return rng.integers(max(1, round((1 - s) * mean)), round((1 + s) * mean), endpoint=True, size=n)

    return Requests(uniform(wl.input_len), uniform(wl.output_len))


def replica_share(reqs: Requests, replicas: int) -> Requests:
    """The requests one of `replicas` replicas gets: a trace's sent requests round-robin (every
    replicas-th, as a round-robin load balancer deals them); drawn requests (no send times) are
    already one replica's sample."""
    if reqs.arrival_s is None or replicas <= 1:
        return reqs
    return Requests(reqs.input_len[::replicas], reqs.output_len[::replicas], reqs.arrival_s[::replicas])


def poisson_arrivals_s(rate_per_s: float, n: int, seed: int) -> np.ndarray:
    """n Poisson arrival times (s) at `rate_per_s`: cumulative exponential gaps, numpy's PCG64 seeded
    with `seed` (the same seed gives the same times)."""
    gaps = np.random.default_rng(seed).exponential(1.0 / rate_per_s, n)
    return np.cumsum(gaps) - gaps[0]  # the first request arrives at 0


def simulate(
    arrival_s,
    input_len,
    output_len,
    times: IterationTimes,
    sched: Scheduler,
    request_overhead_s: float = 0.0,
    concurrency: int | None = None,
) -> dict[str, np.ndarray]:
    """Per-request ttft_s, itl_s (NaN for one output token), e2e_s, sent_s and finish_s of the
    requests `input_len`/`output_len` (arrays, tokens) under the module's scheduler.
    Open loop: request i is sent at arrival_s[i] (non-decreasing). Closed loop (`concurrency`
    = N clients): the first N are sent at 0 and each later one when an earlier one finishes
    (arrival_s is ignored)."""
    S = np.asarray(input_len, dtype=np.int64)
    O = np.asarray(output_len, dtype=np.int64)
    n = len(S)
    if concurrency is None:
        sent = np.asarray(arrival_s, dtype=np.float64).copy()
    else:
        sent = np.full(n, np.inf)
        sent[: min(concurrency, n)] = 0.0
    closed_next = min(concurrency, n) if concurrency is not None else n
    seen = sent + request_overhead_s  # when the engine can admit it
    prompt_left = S.copy()
    out_left = O.copy()
    first = np.full(n, np.nan)  # when each request's first token was computed
    first_sent = np.full(n, np.nan)  # ... and sent (overlap scheduling: after the next iteration)
    unsent = np.empty(0, dtype=np.int64)  # first tokens computed in the last iteration, not yet sent

    def send(next_iteration_s: float) -> np.ndarray:  # the unsent first tokens, the next iteration taking this long
        first_sent[unsent] = first[unsent] + first_token_delay_s(sched.overlap, next_iteration_s)
        return unsent[:0]

    finish = np.full(n, np.nan)
    last = np.full(n, np.nan)  # when each request's latest token came
    gaps: list[np.ndarray] = []  # per-token gaps (s) and how many tokens had each
    weights: list[np.ndarray] = []
    running = np.empty(0, dtype=np.int64)  # admission order
    nxt, done, t = 0, 0, 0.0
    run_left = 0  # decode iterations left in the multi-step run in flight (no admission before 0)
    C = sched.token_budget
    waiting = holds(sched.batch_wait_iters, sched.batch_wait_ratio)
    held = 0  # batch waiting: iterations the prompts in flight have been held (cost/batch_wait.py)
    while done < n:
        room = sched.max_batch - len(running)
        if run_left == 0 and room > 0 and nxt < n and seen[nxt] <= t:
            k = nxt + int(np.searchsorted(seen[nxt : nxt + room], t, side="right"))
            running = np.concatenate([running, np.arange(nxt, k)])
            nxt = k
        if len(running) == 0:
            t = float(seen[nxt])  # idle until the next request (finite: something is still to come)
            continue
        left = prompt_left[running]
        decoding = left == 0
        if decoding.all():
            # only decodes until the next admission or the next finish: k identical iterations at once
            dt = times(len(running), 0.0)
            k = int(out_left[running].min())
            if sched.steps > 1:  # within the run in flight, or a new run of `steps`
                k = min(k, run_left if run_left > 0 else sched.steps)
                run_left = (run_left if run_left > 0 else sched.steps) - k
            elif len(running) < sched.max_batch and nxt < n and np.isfinite(seen[nxt]):
                k = max(min(k, math.ceil((seen[nxt] - t) / dt)), 1)
            unsent = send(dt)  # the first of the k iterations was the next one
            gaps += [t + dt - last[running], np.array([dt])]  # the first gap may hold a stall
            weights += [np.ones(len(running)), np.array([len(running) * (k - 1)])]
            t += k * dt
            out_left[running] -= k
            last[running] = t
        else:
            prefilling = running[~decoding]
            n_dec = int(decoding.sum()) if sched.chunked_prefill else 0
            budget = max(C - n_dec, 0)
            need = prompt_left[prefilling]
            before = np.cumsum(need) - need  # tokens granted to the prompts ahead in the queue
            take = np.minimum(np.maximum(budget - before, 0), need)
            n_decoding = int(decoding.sum())
            # batch waiting, asked only when the scheduler gave a prompt tokens (TensorRT-LLM checks
            # iterations with context requests): the scheduler's prompts and the decode tokens
            if waiting and n_decoding and take.any():
                scheduled = scheduled_tokens(float(S[prefilling[take > 0]].sum()), n_decoding, sched.draft_tokens)
                if release(held, sched.batch_wait_iters, scheduled, sched.batch_wait_ratio, C):
                    held = 0
                else:  # held: this iteration runs the decoding sequences alone
                    held += 1
                    take = np.zeros_like(take)
                    n_dec = n_decoding
            dt = times(n_dec, float(take.sum()))
            t += dt
            unsent = send(dt)
            if n_dec:
                decoders = running[decoding]
                out_left[decoders] -= 1
                gaps.append(t - last[decoders])
                weights.append(np.ones(n_dec))
                last[decoders] = t
            prompt_left[prefilling] -= take
            started = prefilling[(take > 0) & (prompt_left[prefilling] == 0)]
            first[started] = t
            last[started] = t
            unsent = started
            out_left[started] -= 1
        ended = running[(out_left[running] == 0)]
        if len(ended):
            finish[ended] = t
            done += len(ended)
            running = running[out_left[running] > 0]
            if len(running) == 0:
                run_left = 0  # every sequence finished: the run ends with them
                unsent = send(0.0)  # nothing left to launch: sent at once
            if concurrency is not None:  # each finished client sends its next request now
                k = min(closed_next + len(ended), n)
                sent[closed_next:k] = t
                seen[closed_next:k] = t + request_overhead_s
                closed_next = k
    unsent = send(0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        itl = np.where(O > 1, (finish - first) / (O - 1), np.nan)
    return {
        "ttft_s": first_sent - sent,
        "itl_s": itl,
        "e2e_s": np.fmax(finish, first_sent) - sent,  # a one-token request ends when its token is sent
        "sent_s": sent,
        "finish_s": finish,
        "token_gap_s": np.concatenate(gaps) if gaps else np.empty(0),
        "token_gap_weight": np.concatenate(weights) if weights else np.empty(0),
    }


def weighted_percentile(values, weights, p: float) -> float:
    """The smallest value whose share of the total weight at or below it reaches p % (the inverted
    CDF: numpy's percentile method 'inverted_cdf' with integer weights as repeats)."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(np.asarray(weights, dtype=np.float64)[order])
    if len(cum) == 0 or cum[-1] <= 0:
        return float("nan")
    return float(np.asarray(values)[order][np.searchsorted(cum, p / 100.0 * cum[-1], side="left")])


def load_summary(
    sim: dict[str, np.ndarray], output_len, ttft_slo_s: float | None = None, itl_slo_s: float | None = None
) -> dict[str, float]:
    """p50/p90/p99 of TTFT and ITL (ms, numpy's linear percentile over requests), mean of both,
    request and output-token throughput over the span from the first send to the last finish, and
    goodput: requests/s finishing within both SLOs (a missing SLO does not bind)."""
    span_s = float(np.nanmax(sim["finish_s"]) - np.nanmin(sim["sent_s"]))
    out: dict[str, float] = {}
    for name in ("ttft", "itl"):
        v = sim[f"{name}_s"][np.isfinite(sim[f"{name}_s"])] * 1e3
        for p in PERCENTILES:
            out[f"{name}_p{p}_ms"] = float(np.percentile(v, p)) if len(v) else float("nan")
        out[f"{name}_mean_ms"] = float(v.mean()) if len(v) else float("nan")
    for p in PERCENTILES:  # every gap between two tokens of a request (bench_serving's ITL)
        out[f"itl_token_p{p}_ms"] = weighted_percentile(sim["token_gap_s"], sim["token_gap_weight"], p) * 1e3
    ok = np.ones(len(sim["ttft_s"]), dtype=bool)
    if ttft_slo_s is not None:
        ok &= sim["ttft_s"] <= ttft_slo_s
    if itl_slo_s is not None:
        ok &= ~(sim["itl_s"] > itl_slo_s)  # one-token requests have no ITL and meet any ITL SLO
    out["throughput_requests_per_s"] = len(ok) / span_s
    out["throughput_output_tokens_per_s"] = float(np.sum(output_len)) / span_s
    out["goodput_requests_per_s"] = float(ok.sum()) / span_s
    out["slo_attained"] = float(ok.mean())
    return out

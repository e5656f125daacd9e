#!/usr/bin/env python3
"""Measures how much of an MoE layer's time is the host's, on one NVIDIA GPU.

stagec's clock prices kernels on the GPU, each after a fixed launch gap,
and has no host. The fine-grained MoE runs of docs/validation.md are far
slower than that clock; this script measures whether launches and host
synchronisation explain it. It times, in eager PyTorch:

  launch      the host's cost of one launch (an elementwise kernel, a
              small cuBLAS GEMM), the GPU's gap between kernels of a CUDA
              graph, and a device-to-host round trip of a few bytes;
  moe         one rank's share of an MoE layer of the validation runs
              (Qwen3-30B-A3B and GPT-OSS-120B with 16 local experts,
              Qwen3-235B-A22B with 4) as Megatron-Core's dropless
              all-to-all dispatcher runs it, without the all-to-alls:
              router GEMM and top-k in fp32, the token counts copied to
              the host, permutation, the experts' GEMMs (one cuBLAS GEMM
              an expert, as Transformer Engine's grouped linear layer runs
              them on Hopper, or one grouped GEMM) and the weighted
              un-permutation; forward, and forward with backward;
  dense       a Llama-3-8B decoder layer, forward with backward, for a
              layer whose kernels are long.

Routing is forced to balance (each local expert gets the same tokens), as
the validation runs force it. For each case it writes the median wall time
of ten iterations, the GPU's busy time and the kernel count of one
profiled iteration (torch.profiler), and what is left: wall minus busy.

  python3 bench/gpu/measure_moe_host.py -o moe-host.csv    # on the GPU
"""

import argparse
import csv
import statistics
import sys
import time

FIELDS = ["group", "model", "experts", "pass", "tokens", "local_experts",
          "hidden", "expert_ffn", "top_k", "wall_us", "host_us", "gpu_busy_us",
          "kernels", "copies", "idle_us", "idle_us_per_kernel", "note"]

# (model, tokens a rank routes, hidden, expert inner size, top-k, local
# experts, experts in all) of the validation runs' MoE layers.
MOE = [("qwen3-30b-a3b", 8192, 2048, 768, 8, 16, 128),
       ("gpt-oss-120b", 4096, 2880, 2880, 4, 16, 128),
       ("qwen3-235b-a22b", 2048, 4096, 1536, 8, 4, 128)]


def median_wall_us(torch, fn, iterations=10, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    walls, hosts = [], []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        hosts.append((time.perf_counter() - start) * 1e6)
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - start) * 1e6)
    median_wall_us.host = statistics.median(hosts)
    return statistics.median(walls)


KERNEL_FIELDS = ["case", "kernel", "calls", "micros"]


def profile_gpu(torch, fn, case=None):
    """(busy microseconds, kernels, copies) of one call: the union of the
    GPU intervals the profiler records. With `case`, also the time of each
    kernel name into profile_gpu.kernels."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU,
                             ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    intervals, kernels, copies, by_name = [], 0, 0, {}
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        calls, micros = by_name.get(event.name, (0, 0.0))
        by_name[event.name] = (calls + 1,
                               micros + event.time_range.elapsed_us())
        name = event.name.lower()
        if "memcpy" in name or "memset" in name:
            copies += 1
        else:
            kernels += 1
        intervals.append((event.time_range.start, event.time_range.end))
    busy, end = 0.0, None
    for first, last in sorted(intervals):
        if end is None or first > end:
            busy += last - first
            end = last
        elif last > end:
            busy += last - end
            end = last
    if case is not None and profile_gpu.kernels is not None:
        for name, (calls, micros) in sorted(by_name.items(),
                                            key=lambda item: -item[1][1]):
            profile_gpu.kernels.writerow(dict(case=case, kernel=name[:160],
                                              calls=calls,
                                              micros="%.1f" % micros))
    return busy, kernels, copies


profile_gpu.kernels = None


class Moe:
    """One rank's MoE layer without its all-to-alls."""

    def __init__(self, torch, tokens, hidden, ffn, top_k, local, total,
                 grouped):
        self.torch, self.top_k, self.local = torch, top_k, local
        self.grouped = grouped
        dev, bf16 = "cuda", torch.bfloat16
        param = lambda *shape: torch.nn.Parameter(
            torch.randn(*shape, device=dev, dtype=bf16) * 0.02)
        self.x = torch.randn(tokens, hidden, device=dev, dtype=bf16,
                             requires_grad=True)
        self.router = param(total, hidden)
        if grouped:
            self.fc1 = param(local, hidden, 2 * ffn)
            self.fc2 = param(local, ffn, hidden)
            self.params = [self.router, self.fc1, self.fc2]
        else:
            self.fc1 = [param(2 * ffn, hidden) for _ in range(local)]
            self.fc2 = [param(hidden, ffn) for _ in range(local)]
            self.params = [self.router] + self.fc1 + self.fc2
        generator = torch.Generator(device="cpu").manual_seed(0)
        routed = tokens * top_k
        order = torch.randperm(routed, generator=generator)
        self.balanced = (order % local).to(dev)
        self.grad = torch.randn(tokens, hidden, device=dev, dtype=bf16)

    def forward(self):
        torch = self.torch
        F = torch.nn.functional
        logits = F.linear(self.x.float(), self.router.float())
        probs, picked = torch.topk(torch.softmax(logits, dim=-1), self.top_k)
        probs = probs / probs.sum(dim=-1, keepdim=True)
        # Forced balancing: the experts the rank's tokens land on.
        experts = self.balanced
        counts = torch.bincount(experts, minlength=self.local)
        host_counts = counts.tolist()  # the dispatcher's host sync
        order = torch.argsort(experts, stable=True)
        token_of = order // self.top_k
        permuted = self.x.index_select(0, token_of)
        if self.grouped:
            offsets = torch.cumsum(counts, 0).to(torch.int32)
            hidden = torch._grouped_mm(permuted, self.fc1, offs=offsets)
            gate, up = hidden.chunk(2, dim=-1)
            hidden = F.silu(gate) * up
            out = torch._grouped_mm(hidden, self.fc2, offs=offsets)
        else:
            pieces = []
            for index, part in enumerate(permuted.split(host_counts)):
                gate, up = F.linear(part, self.fc1[index]).chunk(2, dim=-1)
                pieces.append(F.linear(F.silu(gate) * up, self.fc2[index]))
            out = torch.cat(pieces)
        weights = probs.reshape(-1).index_select(0, order)
        out = out * weights.unsqueeze(-1).to(out.dtype)
        result = torch.zeros_like(self.x)
        return result.index_add(0, token_of, out)

    def forward_backward(self):
        for p in self.params:
            p.grad = None
        self.x.grad = None
        self.forward().backward(self.grad)


class DenseLayer:
    """A Llama-3-8B decoder layer on one GPU (tp 1), 8192 tokens."""

    def __init__(self, torch, tokens=8192, hidden=4096, ffn=14336, heads=32,
                 kv=8):
        self.torch, self.heads, self.kv = torch, heads, kv
        dev, bf16 = "cuda", torch.bfloat16
        param = lambda *shape: torch.nn.Parameter(
            torch.randn(*shape, device=dev, dtype=bf16) * 0.02)
        self.head_dim = hidden // heads
        self.x = torch.randn(tokens, hidden, device=dev, dtype=bf16,
                             requires_grad=True)
        self.qkv = param((heads + 2 * kv) * self.head_dim, hidden)
        self.proj = param(hidden, hidden)
        self.up = param(2 * ffn, hidden)
        self.down = param(hidden, ffn)
        self.norms = [param(hidden), param(hidden)]
        self.params = [self.qkv, self.proj, self.up, self.down] + self.norms
        self.grad = torch.randn(tokens, hidden, device=dev, dtype=bf16)

    def forward(self):
        torch = self.torch
        F = torch.nn.functional
        tokens, d = self.x.shape[0], self.head_dim
        h = F.rms_norm(self.x, (self.x.shape[1],), self.norms[0])
        q, k, v = F.linear(h, self.qkv).split(
            [self.heads * d, self.kv * d, self.kv * d], dim=-1)
        q = q.view(1, tokens, self.heads, d).transpose(1, 2)
        k = k.view(1, tokens, self.kv, d).transpose(1, 2)
        v = v.view(1, tokens, self.kv, d).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=True)
        a = a.transpose(1, 2).reshape(tokens, -1)
        x = self.x + F.linear(a, self.proj)
        h = F.rms_norm(x, (x.shape[1],), self.norms[1])
        gate, up = F.linear(h, self.up).chunk(2, dim=-1)
        return x + F.linear(F.silu(gate) * up, self.down)

    def forward_backward(self):
        for p in self.params:
            p.grad = None
        self.x.grad = None
        self.forward().backward(self.grad)


def launch_costs(torch, emit):
    tiny = torch.zeros(1, device="cuda")
    small = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)
    calls = 2000

    def many_adds():
        for _ in range(calls):
            tiny.add_(1)

    def many_gemms():
        for _ in range(calls):
            torch.mm(small, small)

    for op, fn in (("eager elementwise launch", many_adds),
                   ("eager 128^3 bf16 GEMM launch", many_gemms)):
        wall = median_wall_us(torch, fn, iterations=5, warmup=1)
        median_wall_us.host /= calls
        busy, kernels, _ = profile_gpu(torch, fn)
        emit(dict(group="launch", model="-", experts="-", **{"pass": op}),
             wall / calls, busy / calls, kernels / calls, 0,
             "per launch: wall/calls, busy/calls")
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        many_adds()
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        for _ in range(200):
            tiny.add_(1)
    wall = median_wall_us(torch, graph.replay, iterations=10)
    median_wall_us.host /= 200
    emit(dict(group="launch", model="-", experts="-",
              **{"pass": "graph elementwise kernel"}), wall / 200, 0, 1, 0,
         "GPU time a kernel, launch gap included")

    def round_trips():
        for _ in range(200):
            tiny.add_(1)
            tiny.item()

    wall = median_wall_us(torch, round_trips, iterations=5, warmup=1)
    median_wall_us.host /= 200
    emit(dict(group="launch", model="-", experts="-",
              **{"pass": "launch and device-to-host sync"}), wall / 200, 0,
         1, 1, "an elementwise kernel then .item()")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="moe-host.csv")
    parser.add_argument("--kernels", default="",
                        help="also write each case's kernels, by name, here")
    args = parser.parse_args()
    import torch
    props = torch.cuda.get_device_properties(0)
    print("gpu: %s, %d SMs; torch %s, cuda %s" % (
        props.name, props.multi_processor_count, torch.__version__,
        torch.version.cuda))
    with open("/proc/cpuinfo") as info:
        cpus = [l.split(":", 1)[1].strip() for l in info
                if l.startswith("model name")]
    print("cpu: %s x %d" % (cpus[0] if cpus else "?", len(cpus)))
    if args.kernels:
        kernel_file = open(args.kernels, "w", newline="")
        profile_gpu.kernels = csv.DictWriter(kernel_file, KERNEL_FIELDS)
        profile_gpu.kernels.writeheader()
    with open(args.output, "w", newline="") as out:
        writer = csv.DictWriter(out, FIELDS, restval="")
        writer.writeheader()

        def emit(row, wall, busy, kernels, copies, note=""):
            row = dict(row)
            idle = max(wall - busy, 0.0)
            row.update(wall_us="%.1f" % wall,
                       host_us="%.1f" % median_wall_us.host, gpu_busy_us="%.1f" % busy,
                       kernels="%g" % kernels, copies=copies,
                       idle_us="%.1f" % idle,
                       idle_us_per_kernel="%.2f" % (idle / max(kernels, 1)),
                       note=note)
            writer.writerow(row)
            out.flush()
            print(",".join(str(row.get(f, "")) for f in FIELDS))

        started = time.time()
        try:
            launch_costs(torch, emit)
        except Exception as error:  # noqa: BLE001 - keep measuring
            print("launch skipped:", str(error)[:300], file=sys.stderr)
        for model, tokens, hidden, ffn, top_k, local, total in MOE:
            for grouped in (False, True):
                try:
                    layer = Moe(torch, tokens, hidden, ffn, top_k, local,
                                total, grouped)
                    for name, fn in (("forward", layer.forward),
                                     ("forward+backward",
                                      layer.forward_backward)):
                        wall = median_wall_us(torch, fn)
                        busy, kernels, copies = profile_gpu(
                            torch, fn, "%s %s %s" % (
                                model, "grouped" if grouped else "per-expert",
                                name))
                        emit(dict(group="moe", model=model,
                                  experts="grouped" if grouped else
                                  "gemm per expert", tokens=tokens,
                                  local_experts=local, hidden=hidden,
                                  expert_ffn=ffn, top_k=top_k,
                                  **{"pass": name}),
                             wall, busy, kernels, copies)
                    del layer
                except Exception as error:  # noqa: BLE001
                    torch.cuda.synchronize()
                    print("skipped", model, grouped, str(error)[:300],
                          file=sys.stderr)
        try:
            layer = DenseLayer(torch)
            for name, fn in (("forward", layer.forward),
                             ("forward+backward", layer.forward_backward)):
                wall = median_wall_us(torch, fn)
                busy, kernels, copies = profile_gpu(torch, fn,
                                                    "llama3-8b " + name)
                emit(dict(group="dense", model="llama3-8b", experts="-",
                          tokens=8192, hidden=4096, **{"pass": name}),
                     wall, busy, kernels, copies)
        except Exception as error:  # noqa: BLE001
            print("dense skipped:", str(error)[:300], file=sys.stderr)
        print("measured in %.0f s" % (time.time() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())

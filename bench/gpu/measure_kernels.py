#!/usr/bin/env python3
"""Measures the kernels stagec's device model prices, on one NVIDIA GPU.

GEMMs of the linear layers the shipped templates produce (Llama 3 8B, 70B and
405B, GPT-3 175B) at the tensor-parallel widths of the validation runs, in
training (forward, data-gradient and weight-gradient products) and in
serving (forward products of 1 to 4096 tokens, of 32 to 768 in the group
`midsize`, and of 16 tokens through weights of 2 to 256 MB); the experts'
GEMMs of Mixtral, Qwen3 and GPT-OSS, and (group `grouped`) an
expert-parallel decode step's grouped GEMMs of 1 to 128 tokens an expert
(torch._grouped_mm); fused attention (forward and backward, causal, also
by head size) and decode attention against a KV cache; FP8 casts and a
copy.
Each precision runs as the frameworks run it: bf16 through cuBLAS, FP8
(e4m3, one scale per tensor) through torch._scaled_mm with the operand
layouts Transformer Engine keeps (fast accumulation in the forward product
only), tf32 on a few large products.

Each kernel is timed as CUDA-graph replays of several back-to-back calls
over rotating copies of its operands (so that weights come from HBM, as
between a layer's kernels), median of the replays. Writes one CSV row per
kernel: the shape, the FLOPs and the fewest bytes (operands and result,
once), the time in microseconds and the rates.

  python3 bench/gpu/measure_kernels.py -o kernels.csv      # on the GPU
  python3 bench/gpu/measure_kernels.py --list              # shapes only

docs/validation.md ("Kernels measured on a GPU") compares the rows with
the device model; test/e2e/kernel_model_check.py does so in CI.
"""

import argparse
import csv
import math
import statistics
import sys
import time

FIELDS = [
    "group", "model", "op", "precision", "backend", "batch", "m", "n", "k",
    "heads", "kv_heads", "seq_q", "seq_k", "head_dim", "causal", "flops",
    "bytes", "micros", "tflops", "gbps", "note"
]

# The linear layers of a Llama-style (gated MLP) or GPT-style block.
MODELS = {
    "llama3-8b": dict(h=4096, ffn=14336, q=32, kv=8, hd=128, gated=True),
    "llama3-70b": dict(h=8192, ffn=28672, q=64, kv=8, hd=128, gated=True),
    "llama3-405b": dict(h=16384, ffn=53248, q=128, kv=8, hd=128, gated=True),
    "gpt3-175b": dict(h=12288, ffn=49152, q=96, kv=96, hd=128, gated=False),
}

# (model, tp, tokens per micro-batch) of the training runs validated.
TRAINING = [("llama3-8b", 1, 8192), ("llama3-70b", 4, 8192),
            ("llama3-405b", 8, 4096), ("gpt3-175b", 4, 2048)]

# (model, tp) of the serving runs validated, and the tokens of a batch.
SERVING = [("llama3-8b", 1), ("llama3-70b", 4), ("llama3-70b", 8)]
SERVING_TOKENS = [1, 16, 64, 256, 1024, 4096]
# Between the two regimes: the decode batches of an engine at saturation.
MIDSIZE_TOKENS = [32, 96, 128, 192, 384, 512, 768]

# Experts: (model, hidden, expert inner size, gated).
EXPERTS = [("mixtral-8x7b", 4096, 14336, True),
           ("qwen3-30b-a3b", 2048, 768, True),
           ("qwen3-235b-a22b", 4096, 1536, True),
           ("gpt-oss-120b", 2880, 2880, True)]
EXPERT_TOKENS = [16, 64, 256, 1024]
LOCAL_EXPERTS = [4, 16]
# An expert-parallel decode step's grouped GEMMs (attention data-parallel
# MoE serving): a rank's experts, few tokens each, in one grouped kernel
# (torch._grouped_mm: CUTLASS's grouped GEMM on Hopper). (model, hidden,
# expert inner size, local experts).
DECODE_EXPERTS = [("qwen3-235b-a22b", 4096, 1536, 16),
                  ("deepseek-v3", 7168, 2048, 32),
                  ("gpt-oss-120b", 2880, 2880, 32)]
DECODE_EXPERT_TOKENS = [1, 4, 8, 16, 32, 64, 128]

# Fused attention, causal: (model, q heads, kv heads per rank, seq, batch).
ATTENTION = [("llama3-8b", 32, 8, 8192, 1), ("llama3-70b", 16, 2, 8192, 1),
             ("llama3-405b", 16, 1, 8192, 1), ("gpt3-175b", 24, 24, 2048, 1),
             ("llama3-70b", 16, 2, 1024, 8), ("llama3-70b", 16, 2, 2048, 4),
             ("llama3-70b", 16, 2, 4096, 2), ("llama3-70b", 16, 2, 16384, 1),
             ("gpt-oss-120b", 64, 8, 4096, 1)]
ATTENTION_HEAD_DIM = {"gpt-oss-120b": 64}

# Fused attention by head size (64: GPT-OSS, 128: Llama, 192: DeepSeek's
# MLA queries, 256: Gemma), 16 heads, causal.
HEAD_SIZES = [64, 96, 128, 192, 256]
HEAD_SWEEP_SEQS = [2048, 8192]

# Weight-streaming GEMMs: 16 tokens through weights of 2 MB to 256 MB, the
# sizes at which a decode step's kernels reach the memory's bandwidth.
STREAMING_N = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]

# Decode attention: (model, q heads, kv heads per rank), contexts, batches.
DECODE = [("llama3-8b", 32, 8), ("llama3-70b", 16, 2)]
DECODE_CONTEXTS = [1024, 4096, 16384]
DECODE_BATCHES = [1, 16, 64]


def linear_layers(spec, tp):
    """(name, N, K) of each linear layer on one of `tp` ranks."""
    h, hd = spec["h"], spec["hd"]
    qkv = (spec["q"] + 2 * spec["kv"]) * hd // tp
    fc1 = (2 if spec["gated"] else 1) * spec["ffn"] // tp
    return [("qkv", qkv, h), ("proj", h, spec["q"] * hd // tp),
            ("fc1", fc1, h), ("fc2", h, spec["ffn"] // tp)]


def element_bytes(precision):
    return {"bf16": 2, "fp16": 2, "tf32": 4, "fp8": 1}[precision]


def gemm_cases():
    """Every GEMM: (group, model, op, precision, batch, m, n, k)."""
    cases = []
    for precision in ("bf16", "fp8", "tf32"):
        cases.append(("peak", "-", "fwd", precision, 1, 8192, 8192, 8192))
    for model, tp, tokens in TRAINING:
        for name, n, k in linear_layers(MODELS[model], tp):
            for precision in ("bf16", "fp8"):
                # Forward y = x W^T: M tokens, N outputs, K inputs. The data
                # gradient dx = dy W reduces over N; the weight gradient
                # dW = dy^T x reduces over the tokens.
                cases.append(("training", model, name + ".fwd", precision,
                              1, tokens, n, k))
                cases.append(("training", model, name + ".dgrad", precision,
                              1, tokens, k, n))
                cases.append(("training", model, name + ".wgrad", precision,
                              1, n, k, tokens))
    for group, sizes in (("serving", SERVING_TOKENS),
                         ("midsize", MIDSIZE_TOKENS)):
        for model, tp in SERVING:
            for name, n, k in linear_layers(MODELS[model], tp):
                for tokens in sizes:
                    for precision in ("bf16", "fp8"):
                        cases.append((group, "%s-tp%d" % (model, tp),
                                      name + ".fwd", precision, 1, tokens, n,
                                      k))
    for model, h, ffn, gated in EXPERTS:
        for experts in LOCAL_EXPERTS:
            for tokens in EXPERT_TOKENS:
                fc1 = ffn * (2 if gated else 1)
                for name, n, k in (("expert.fc1", fc1, h),
                                   ("expert.fc2", h, ffn)):
                    for precision in ("bf16", "fp8"):
                        cases.append(("experts", model, name, precision,
                                      experts, tokens, n, k))
    for model, h, ffn, experts in DECODE_EXPERTS:
        for tokens in DECODE_EXPERT_TOKENS:
            for name, n, k in (("expert.fc1", 2 * ffn, h),
                               ("expert.fc2", h, ffn)):
                for precision in ("bf16", "fp8"):
                    cases.append(("grouped", model, name, precision,
                                  experts, tokens, n, k))
    for n in STREAMING_N:
        for precision in ("bf16", "fp8"):
            cases.append(("streaming", "k4096", "w.fwd", precision, 1, 16, n,
                          4096))
    return cases


def gemm_cost(precision, batch, m, n, k):
    width = element_bytes(precision)
    out = 4 if precision == "tf32" else 2  # FP8 products write bf16.
    flops = 2 * batch * m * n * k
    nbytes = batch * ((m * k + k * n) * width + m * n * out)
    return flops, nbytes


def attention_cases():
    """(group, model, q heads, kv heads, seq_q, seq_k, head dim, batch,
    causal)."""
    cases = []
    for model, heads, kv, seq, batch in ATTENTION:
        hd = ATTENTION_HEAD_DIM.get(model, 128)
        cases.append(("attention", model, heads, kv, seq, seq, hd, batch, 1))
    for hd in HEAD_SIZES:
        for seq in HEAD_SWEEP_SEQS:
            cases.append(("heads", "16x%d" % hd, 16, 16, seq, seq, hd, 1, 1))
    for model, heads, kv in DECODE:
        for context in DECODE_CONTEXTS:
            for batch in DECODE_BATCHES:
                cases.append(("decode", model, heads, kv, 1, context, 128,
                              batch, 0))
    return cases


def attention_cost(heads, kv, seq_q, seq_k, hd, batch, causal):
    pairs = seq_q * (seq_q + 1) // 2 if causal else seq_q * seq_k
    flops = 4 * batch * heads * hd * pairs
    nbytes = 2 * batch * hd * (2 * heads * seq_q + 2 * kv * seq_k)
    return flops, nbytes


def list_cases():
    for group, model, op, precision, batch, m, n, k in gemm_cases():
        flops, nbytes = gemm_cost(precision, batch, m, n, k)
        print(group, model, op, precision, batch, m, n, k, flops, nbytes)
    for case in attention_cases():
        print(*case, *attention_cost(*case[2:]))
    print(len(gemm_cases()), "GEMMs,", len(attention_cases()), "attentions",
          file=sys.stderr)


class Timer:
    """Times a kernel as CUDA-graph replays of back-to-back calls."""

    def __init__(self, torch):
        self.torch = torch

    def repetitions(self, estimate_us):
        # About 2 ms a replay: launch gaps vanish, the clock stays up.
        return max(4, min(200, int(math.ceil(2000 / max(estimate_us, 1)))))

    def graph(self, call, sets, estimate_us):
        torch = self.torch
        reps = self.repetitions(estimate_us)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for i in range(max(3, sets)):
                call(i % sets)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(reps):
                call(i % sets)
        return self.replays(graph.replay, reps)

    def eager(self, call, sets, estimate_us):
        reps = self.repetitions(estimate_us)
        for i in range(3):
            call(i % sets)
        return self.replays(lambda: [call(i % sets) for i in range(reps)],
                            reps)

    def replays(self, run, reps, count=15):
        torch = self.torch
        run()
        torch.cuda.synchronize()
        times = []
        for _ in range(count):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0 / reps)
        return statistics.median(times)

    def best(self, call, sets, estimate_us):
        """Graph replays, or eager calls where capture fails."""
        try:
            return self.graph(call, sets, estimate_us), ""
        except Exception as error:  # noqa: BLE001 - any capture failure
            self.torch.cuda.synchronize()
            return self.eager(call, sets, estimate_us), \
                "eager (%s)" % type(error).__name__


def rotating_sets(set_bytes):
    """Copies of the operands that keep repeated calls out of the L2."""
    return max(1, min(8, int(math.ceil(256e6 / max(set_bytes, 1)))))


def estimate_us(flops, nbytes, tflops=600, gbps=3000):
    return max(flops / (tflops * 1e6), nbytes / (gbps * 1e3), 1)


class Bench:

    def __init__(self, torch, writer, log, graph_backward=False):
        self.torch = torch
        self.graph_backward = graph_backward
        self.writer = writer
        self.log = log
        self.timer = Timer(torch)
        self.dev = torch.device("cuda")

    def emit(self, row, flops, nbytes, micros, note=""):
        row = dict(row)
        row.update(flops=flops, bytes=nbytes, micros="%.3f" % micros,
                   tflops="%.1f" % (flops / micros / 1e6),
                   gbps="%.1f" % (nbytes / micros / 1e3), note=note)
        self.writer.writerow(row)
        self.log.flush()

    def randn(self, *shape, dtype=None):
        torch = self.torch
        t = torch.randn(*shape, device=self.dev, dtype=torch.bfloat16)
        if dtype is None or dtype == torch.bfloat16:
            return t
        if dtype == torch.float32:
            return t.float()
        return (t * 0.5).to(dtype)

    def gemm_call(self, precision, op, batch, m, n, k):
        """A call computing the product in `precision`, with the operand
        layouts the framework keeps: A row-major, B column-major (the
        transposed copy of a weight or of an activation for FP8)."""
        torch = self.torch
        if precision == "fp8":
            dtype = torch.float8_e4m3fn
            fast = op.endswith(".fwd") or op == "fwd"
            one = torch.ones((), device=self.dev, dtype=torch.float32)
            a = self.randn(m, k, dtype=dtype)
            b = self.randn(n, k, dtype=dtype).t()
            return lambda: torch._scaled_mm(a, b, one, one,
                                            out_dtype=torch.bfloat16,
                                            use_fast_accum=fast)
        dtype = torch.float32 if precision == "tf32" else torch.bfloat16
        if batch > 1:
            a = self.randn(batch, m, k, dtype=dtype)
            b = self.randn(batch, n, k, dtype=dtype).transpose(1, 2)
            c = torch.empty(batch, m, n, device=self.dev, dtype=dtype)
            return lambda: torch.bmm(a, b, out=c)
        a = self.randn(m, k, dtype=dtype)
        b = self.randn(n, k, dtype=dtype).t()
        c = torch.empty(m, n, device=self.dev, dtype=dtype)
        return lambda: torch.matmul(a, b, out=c)

    def gemm(self, group, model, op, precision, batch, m, n, k):
        flops, nbytes = gemm_cost(precision, batch, m, n, k)
        row = dict(group=group, model=model, op=op, precision=precision,
                   backend="cublas", batch=batch, m=m, n=n, k=k)
        note = ""
        run_m = m
        if precision == "fp8" and m % 16:
            run_m = (m + 15) // 16 * 16  # cuBLASLt FP8 wants 16-aligned M.
            note = "m padded to %d" % run_m
        if group == "grouped" and precision == "bf16":
            return self.grouped_bf16(row, flops, nbytes, batch, m, n, k)
        if precision == "fp8" and batch > 1:
            return self.grouped_fp8(row, flops, nbytes, batch, run_m, n, k)
        sets = rotating_sets(nbytes)
        calls = [self.gemm_call(precision, op, batch, run_m, n, k)
                 for _ in range(sets)]
        micros, how = self.timer.best(lambda i: calls[i](), sets,
                                      estimate_us(flops, nbytes))
        self.emit(row, flops, nbytes, micros, "; ".join(x for x in (note, how)
                                                        if x))

    def grouped_bf16(self, row, flops, nbytes, groups, m, n, k):
        """Experts in bf16 through torch's grouped GEMM, m tokens each."""
        torch = self.torch
        grouped = getattr(torch, "_grouped_mm", None)
        if grouped is None:
            raise RuntimeError("torch has no _grouped_mm")
        sets = rotating_sets(nbytes)

        def make():
            a = self.randn(groups * m, k)
            b = self.randn(groups, n, k).transpose(1, 2)
            ends = torch.arange(m, groups * m + 1, m, device=self.dev,
                                dtype=torch.int32)
            return lambda: grouped(a, b, offs=ends, out_dtype=torch.bfloat16)

        calls = [make() for _ in range(sets)]
        micros, how = self.timer.best(lambda i: calls[i](), sets,
                                      estimate_us(flops, nbytes))
        self.emit(dict(row, backend="grouped_mm"), flops, nbytes, micros, how)

    def grouped_fp8(self, row, flops, nbytes, groups, m, n, k):
        """Experts in FP8: torch's grouped FP8 product (row-wise scales)."""
        torch = self.torch
        grouped = getattr(torch, "_scaled_grouped_mm", None)
        if grouped is None:
            raise RuntimeError("torch has no _scaled_grouped_mm")
        dtype = torch.float8_e4m3fn
        sets = rotating_sets(nbytes)

        def make():
            a = self.randn(groups * m, k, dtype=dtype)
            b = self.randn(groups, n, k, dtype=dtype).transpose(1, 2)
            scale_a = torch.ones(groups * m, device=self.dev,
                                 dtype=torch.float32)
            scale_b = torch.ones(groups, n, device=self.dev,
                                 dtype=torch.float32)
            offs = torch.arange(m, groups * m + 1, m, device=self.dev,
                                dtype=torch.int32)
            return lambda: grouped(a, b, scale_a, scale_b, offs=offs,
                                   out_dtype=torch.bfloat16)

        calls = [make() for _ in range(sets)]
        micros, how = self.timer.best(lambda i: calls[i](), sets,
                                      estimate_us(flops, nbytes))
        row = dict(row, backend="scaled_grouped_mm")
        self.emit(row, flops, nbytes, micros, how)

    def attention(self, group, model, heads, kv, seq_q, seq_k, hd, batch,
                  causal):
        torch = self.torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        flops, nbytes = attention_cost(heads, kv, seq_q, seq_k, hd, batch,
                                       causal)
        base = dict(group=group, model=model, precision="bf16", batch=batch,
                    heads=heads, kv_heads=kv, seq_q=seq_q, seq_k=seq_k,
                    head_dim=hd, causal=causal)
        backends = [("flash", SDPBackend.FLASH_ATTENTION),
                    ("cudnn", SDPBackend.CUDNN_ATTENTION)]
        for name, backend in backends:
            try:
                with sdpa_kernel([backend]):
                    if causal:
                        self.attention_training(base, name, F, heads, kv,
                                                seq_q, hd, batch, flops,
                                                nbytes)
                    else:
                        self.attention_decode(base, name, F, heads, kv,
                                              seq_k, hd, batch, flops,
                                              nbytes)
            except Exception as error:  # noqa: BLE001 - keep measuring
                torch.cuda.synchronize()
                print("skipped %s %s %s: %s" % (group, model, name,
                                                str(error)[:200]),
                      file=sys.stderr)

    def attention_training(self, base, name, F, heads, kv, seq, hd, batch,
                           flops, nbytes):
        torch = self.torch
        # Keys and values repeated to the query heads: the products are the
        # same, and every backend accepts it.
        q, k, v = (self.randn(batch, heads, seq, hd).requires_grad_()
                   for _ in range(3))
        grad = self.randn(batch, heads, seq, hd)
        forward = lambda i: F.scaled_dot_product_attention(q, k, v,
                                                           is_causal=True)
        with torch.no_grad():
            fwd, how = self.timer.best(forward, 1,
                                       estimate_us(flops, nbytes, 300))
        self.emit(dict(base, op="attn.fwd", backend=name), flops, nbytes,
                  fwd, how)

        def step(i):
            # Fresh gradients each time: no accumulation kernels.
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.autograd.grad(out, (q, k, v), grad)

        # Graph replays where the backward captures (no host time between
        # a short kernel's launches), eager calls otherwise (noted).
        if self.graph_backward:
            both, how = self.timer.best(step, 1,
                                        estimate_us(3.5 * flops, nbytes, 300))
        else:
            both, how = self.timer.eager(
                step, 1, estimate_us(3.5 * flops, nbytes, 300)), "eager"
        bwd = max(both - fwd, 1e-3)
        self.emit(dict(base, op="attn.bwd", backend=name), int(2.5 * flops),
                  2 * nbytes, bwd,
                  "fwd+bwd %.1f us less fwd (%s)" % (both, how or "graph"))

    def attention_decode(self, base, name, F, heads, kv, context, hd, batch,
                         flops, nbytes):
        torch = self.torch
        group_size = heads // kv
        sets = rotating_sets(nbytes)

        # A query per head; the group's query heads ride as queries of their
        # key/value head, so the cache is read once (as decode kernels do).
        def make():
            q = self.randn(batch, kv, group_size, hd)
            k = self.randn(batch, kv, context, hd)
            v = self.randn(batch, kv, context, hd)
            return lambda: F.scaled_dot_product_attention(q, k, v)

        calls = [make() for _ in range(sets)]
        with torch.no_grad():
            micros, how = self.timer.best(lambda i: calls[i](), sets,
                                          estimate_us(flops, nbytes))
        self.emit(dict(base, op="decode", backend=name), flops, nbytes,
                  micros, how)

    def memory(self):
        torch = self.torch
        elements = 1 << 29  # 1 GiB of bf16
        src = torch.randn(elements, device=self.dev, dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        micros, how = self.timer.best(lambda i: dst.copy_(src), 1,
                                      estimate_us(0, 4 * elements))
        self.emit(dict(group="memory", model="-", op="copy",
                       precision="bf16", backend="torch"), 0, 4 * elements,
                  micros, how)
        # An elementwise kernel (cudaMemcpy's device-to-device path can
        # stream slower than a kernel does).
        micros, how = self.timer.best(
            lambda i: torch.mul(src, 1.5, out=dst), 1,
            estimate_us(0, 4 * elements))
        self.emit(dict(group="memory", model="-", op="scale",
                       precision="bf16", backend="torch"), elements,
                  4 * elements, micros, how)
        # The two passes of an FP8 cast of an activation: its amax (reads
        # bf16), then the conversion (reads bf16, writes e4m3).
        for rows, cols in ((8192, 8192), (8192, 28672), (4096, 53248)):
            x = torch.randn(rows, cols, device=self.dev, dtype=torch.bfloat16)
            y = torch.empty(rows, cols, device=self.dev,
                            dtype=torch.float8_e4m3fn)
            passes = (("fp8.amax", lambda i: torch.amax(x), 2),
                      ("fp8.cast", lambda i: y.copy_(x), 3))
            for op, call, width in passes:
                nbytes = rows * cols * width
                micros, how = self.timer.best(call, 1, estimate_us(0, nbytes))
                self.emit(dict(group="memory", model="-", op=op,
                               precision="fp8", backend="torch", m=rows,
                               n=cols), 0, nbytes, micros, how)


def describe(torch):
    props = torch.cuda.get_device_properties(0)
    lines = ["gpu: %s" % props.name, "sms: %d" % props.multi_processor_count,
             "memory_gib: %.1f" % (props.total_memory / 2**30),
             "torch: %s" % torch.__version__, "cuda: %s" % torch.version.cuda,
             "cudnn: %s" % torch.backends.cudnn.version()]
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="kernels.csv")
    parser.add_argument("--list", action="store_true",
                        help="print the shapes and their costs; no GPU")
    parser.add_argument("--only", default="",
                        help="comma-separated groups to measure")
    parser.add_argument("--graph-backward", action="store_true",
                        help="time attention's forward and backward as CUDA "
                        "graph replays too (default: eager calls, as the "
                        "first figures were taken)")
    args = parser.parse_args()
    if args.list:
        list_cases()
        return 0

    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    only = set(filter(None, args.only.split(",")))
    wanted = lambda group: not only or group in only
    for line in describe(torch):
        print(line)
    with open(args.output, "w", newline="") as out:
        writer = csv.DictWriter(out, FIELDS, restval="")
        writer.writeheader()
        bench = Bench(torch, writer, out, args.graph_backward)
        # Bring the clocks up before the first timed kernel.
        warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        deadline = time.time() + 1.5
        while time.time() < deadline:
            warm @ warm
        torch.cuda.synchronize()
        del warm
        started = time.time()
        if wanted("memory"):
            bench.memory()
        for case in gemm_cases():
            if not wanted(case[0]):
                continue
            try:
                bench.gemm(*case)
            except Exception as error:  # noqa: BLE001 - keep measuring
                torch.cuda.synchronize()
                print("skipped", *case, str(error)[:200], file=sys.stderr)
        for case in attention_cases():
            if wanted(case[0]):
                bench.attention(*case)
        print("measured in %.0f s" % (time.time() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())

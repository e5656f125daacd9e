#!/usr/bin/env python3
"""Times whole forward steps of a dense Llama model on one NVIDIA GPU.

stagec prices a serving iteration as the sum of its kernels plus an
engine's overhead per iteration (docs/serving.md). measure_kernels.py
checks single kernels; this script checks the sum: the decode steps (a
batch of sequences, one new token each, against a KV cache) and prefills
(one sequence of N tokens) of Llama 3 8B on one GPU and of one rank's share
of Llama 3 70B on tp 4 (its all-reduces left out), in bf16 and in the FP8
recipe (the linear layers' GEMMs in e4m3 with a scale per tensor, the
activation cast before each; attention, norms and the LM head in bf16).

The model is plain PyTorch with random weights: RMSNorm, the fused QKV
GEMM, rotary embeddings, the new keys and values written into a bf16 cache,
attention through scaled_dot_product_attention (flash for prefill; decode
through its own kernels, which at batch 1 stream the cache slower than an
engine's split-KV kernel: docs/validation.md), the output projection, the
gated MLP. Each step is captured as one CUDA graph and its replays timed
(median of ten), the layers and the head (final norm and LM head over the
tokens that are sampled: every sequence's in decode, the last in prefill)
apart. One eager step under the profiler sums the kernels' own times by
kind (GEMM, attention, other). Writes one CSV row per step and, with
--kernels, the profiled kernels by name.

  python3 bench/gpu/measure_steps.py -o steps.csv --kernels k.csv   # GPU
  python3 bench/gpu/measure_steps.py --list                         # cases

test/e2e/step_model_check.py prices the same steps with stagec.
"""

import argparse
import csv
import statistics
import sys
import time

# Per rank: hidden, q heads, kv heads, head dim, MLP inner, vocabulary
# slice, layers.
MODELS = {
    "llama3-8b-tp1": dict(template="llama3-8b", tp=1, h=4096, q=32, kv=8,
                          hd=128, ffn=14336, vocab=128256, layers=32),
    "llama3-70b-tp4": dict(template="llama3-70b", tp=4, h=8192, q=16, kv=2,
                           hd=128, ffn=7168, vocab=32064, layers=80),
}

# Decode: (batch, context) per model (the largest caches need an H200).
DECODE = {
    "llama3-8b-tp1": [(1, 1024), (16, 1024), (64, 1024), (128, 1024),
                      (256, 1024), (512, 1024), (1, 4096), (16, 4096),
                      (64, 4096), (128, 4096)],
    "llama3-70b-tp4": [(1, 1024), (16, 1024), (64, 1024), (256, 1024),
                       (1, 4096), (16, 4096), (64, 4096)],
}
PREFILL = [512, 2048, 8192]
PRECISIONS = ["bf16", "fp8"]

FIELDS = ["model", "template", "tp", "linear", "mode", "precision", "batch",
          "context", "tokens", "step_us", "layers_us", "head_us",
          "kernel_us", "gemm_us", "attention_us", "other_us", "kernels",
          "note"]


def cases():
    for model in MODELS:
        for precision in PRECISIONS:
            for batch, context in DECODE[model]:
                yield model, "decode", precision, batch, context
            for tokens in PREFILL:
                yield model, "prefill", precision, 1, tokens


def kernel_kind(name):
    lowered = name.lower()
    if any(s in lowered for s in ("flash", "fmha", "attention", "sdpa")):
        return "attention"
    if any(s in lowered for s in ("gemm", "nvjet", "xmma", "cutlass",
                                  "matmul", "gemv")):
        return "gemm"
    return "other"


class Step:
    """One rank's share of the model, built for one step's shape."""

    def __init__(self, torch, spec, mode, precision, batch, context,
                 split=False):
        self.torch = torch
        self.split = split
        self.spec = spec
        self.mode = mode
        self.fp8 = precision == "fp8"
        dev = torch.device("cuda")
        h, q, kv, hd = spec["h"], spec["q"], spec["kv"], spec["hd"]
        self.tokens = batch if mode == "decode" else context
        # cuBLASLt's FP8 GEMM wants 16-aligned rows.
        self.rows = self.tokens
        if self.fp8 and self.rows % 16:
            self.rows = (self.rows + 15) // 16 * 16
        self.batch, self.context = batch, context
        wtype = torch.float8_e4m3fn if self.fp8 else torch.bfloat16

        def weight(n, k):
            w = torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02
            return w.to(wtype)

        self.layers = []
        for _ in range(spec["layers"]):
            layer = dict(
                attn_norm=torch.ones(h, device=dev, dtype=torch.bfloat16),
                ffn_norm=torch.ones(h, device=dev, dtype=torch.bfloat16),
                qkv=weight((q + 2 * kv) * hd, h), proj=weight(h, q * hd),
                fc1=weight(2 * spec["ffn"], h), fc2=weight(h, spec["ffn"]))
            if mode == "decode":
                shape = (batch, kv, context + 1, hd)
                layer["k"] = torch.randn(shape, device=dev,
                                         dtype=torch.bfloat16)
                layer["v"] = torch.randn(shape, device=dev,
                                         dtype=torch.bfloat16)
            if split:
                # Separate weights (and GEMMs) for q, k, v and gate, up.
                layer["qkv"] = list(layer["qkv"].split(
                    [q * hd, kv * hd, kv * hd]))
                layer["fc1"] = list(layer["fc1"].chunk(2))
                layer["qkv"] = [w.contiguous() for w in layer["qkv"]]
                layer["fc1"] = [w.contiguous() for w in layer["fc1"]]
            self.layers.append(layer)
        self.norm = torch.ones(h, device=dev, dtype=torch.bfloat16)
        self.head = torch.randn(spec["vocab"], h, device=dev,
                                dtype=torch.bfloat16) * 0.02
        self.one = torch.ones((), device=dev, dtype=torch.float32)
        self.x = torch.randn(self.rows, h, device=dev, dtype=torch.bfloat16)
        positions = torch.arange(self.tokens, device=dev) + (
            context if mode == "decode" else 0)
        freqs = 1.0 / (500000.0**(torch.arange(0, hd, 2, device=dev) / hd))
        angles = torch.outer(positions.float(), freqs)
        self.cos = torch.cat([angles.cos()] * 2, -1).to(torch.bfloat16)
        self.sin = torch.cat([angles.sin()] * 2, -1).to(torch.bfloat16)

    def linear(self, x, w):
        if self.split and isinstance(w, list):
            return self.torch.cat([self.linear(x, part) for part in w], -1)
        torch = self.torch
        if self.fp8:
            return torch._scaled_mm(x.to(torch.float8_e4m3fn), w.t(),
                                    self.one, self.one,
                                    out_dtype=torch.bfloat16,
                                    use_fast_accum=True)
        return x @ w.t()

    def rope(self, t):
        half = t.shape[-1] // 2
        rotated = self.torch.cat([-t[..., half:], t[..., :half]], -1)
        return t * self.cos[:, None, :] + rotated * self.sin[:, None, :]

    def attention(self, layer, qkv):
        torch = self.torch
        import torch.nn.functional as F
        spec = self.spec
        q_heads, kv, hd = spec["q"], spec["kv"], spec["hd"]
        t = self.tokens
        qkv = qkv[:t]
        q = self.rope(qkv[:, :q_heads * hd].view(t, q_heads, hd))
        k = self.rope(qkv[:, q_heads * hd:(q_heads + kv) * hd].view(
            t, kv, hd))
        v = qkv[:, (q_heads + kv) * hd:].view(t, kv, hd)
        if self.mode == "decode":
            # The new token's key and value go to the cache's last slot;
            # the group's query heads ride as queries of their kv head.
            layer["k"][:, :, self.context] = k
            layer["v"][:, :, self.context] = v
            group = q_heads // kv
            out = F.scaled_dot_product_attention(
                q.view(t, kv, group, hd), layer["k"], layer["v"])
            out = out.reshape(t, q_heads * hd)
        else:
            out = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                v.transpose(0, 1)[None], is_causal=True, enable_gqa=True)
            out = out[0].transpose(0, 1).reshape(t, q_heads * hd)
        if self.rows != t:
            out = torch.nn.functional.pad(out, (0, 0, 0, self.rows - t))
        return out

    def run_layers(self):
        torch = self.torch
        F = torch.nn.functional
        x = self.x
        for layer in self.layers:
            h = F.rms_norm(x, (x.shape[-1],), layer["attn_norm"])
            a = self.attention(layer, self.linear(h, layer["qkv"]))
            x = x + self.linear(a, layer["proj"])
            h = F.rms_norm(x, (x.shape[-1],), layer["ffn_norm"])
            gate, up = self.linear(h, layer["fc1"]).chunk(2, -1)
            x = x + self.linear(F.silu(gate) * up, layer["fc2"])
        self.out = x
        return x

    def run_head(self):
        F = self.torch.nn.functional
        x = self.out[:self.tokens] if self.mode == "decode" else \
            self.out[self.tokens - 1:self.tokens]
        return F.rms_norm(x, (x.shape[-1],), self.norm) @ self.head.t()


def time_graph(torch, call, count=10):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(count):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    del graph
    return statistics.median(times)


def profile_kernels(torch, step):
    """The kernels of one eager step: name -> (count, microseconds)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step.run_layers()
        step.run_head()
        torch.cuda.synchronize()
    kernels = {}
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        count, micros = kernels.get(event.name, (0, 0.0))
        kernels[event.name] = (count + 1,
                               micros + event.time_range.elapsed_us())
    return kernels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="steps.csv")
    parser.add_argument("--kernels", default="",
                        help="also write the profiled kernels by name here")
    parser.add_argument("--list", action="store_true",
                        help="print the cases; no GPU")
    parser.add_argument("--only", default="",
                        help="comma-separated models to measure")
    parser.add_argument("--split-linear", action="store_true",
                        help="q, k, v and gate, up as separate GEMMs (as "
                        "stagec's templates write them), not fused")
    args = parser.parse_args()
    if args.list:
        for case in cases():
            print(*case)
        return 0

    import torch
    only = set(filter(None, args.only.split(",")))
    props = torch.cuda.get_device_properties(0)
    print("gpu: %s, torch %s, cuda %s" % (props.name, torch.__version__,
                                          torch.version.cuda))
    kernel_rows = []
    started = time.time()
    with open(args.output, "w", newline="") as out:
        writer = csv.DictWriter(out, FIELDS, restval="")
        writer.writeheader()
        for model, mode, precision, batch, context in cases():
            if only and model not in only:
                continue
            spec = MODELS[model]
            try:
                step = Step(torch, spec, mode, precision, batch, context,
                            args.split_linear)
                with torch.no_grad():
                    layers = time_graph(torch, step.run_layers)
                    head = time_graph(torch, step.run_head)
                    both = time_graph(torch, lambda: (step.run_layers(),
                                                      step.run_head()))
                    try:
                        kernels = profile_kernels(torch, step)
                    except Exception as error:  # noqa: BLE001
                        print("no profile:", str(error)[:300],
                              file=sys.stderr)
                        kernels = {}
            except Exception as error:  # noqa: BLE001 - keep measuring
                print("skipped", model, mode, precision, batch, context,
                      str(error)[:300], file=sys.stderr)
                step = None
                torch.cuda.empty_cache()
                continue
            by_kind = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
            count = 0
            for name, (calls, micros) in kernels.items():
                by_kind[kernel_kind(name)] += micros
                count += calls
                kernel_rows.append(dict(
                    model=model, linear="split" if args.split_linear
                    else "fused", mode=mode, precision=precision, batch=batch,
                    context=context, kind=kernel_kind(name), calls=calls,
                    micros="%.1f" % micros, name=name[:160]))
            note = "rows padded to %d" % step.rows \
                if step.rows != step.tokens else ""
            writer.writerow(dict(
                model=model, template=spec["template"], tp=spec["tp"],
                linear="split" if args.split_linear else "fused",
                mode=mode, precision=precision, batch=batch,
                context=context, tokens=step.tokens,
                step_us="%.1f" % both, layers_us="%.1f" % layers,
                head_us="%.1f" % head,
                kernel_us="%.1f" % sum(by_kind.values()),
                gemm_us="%.1f" % by_kind["gemm"],
                attention_us="%.1f" % by_kind["attention"],
                other_us="%.1f" % by_kind["other"], kernels=count,
                note=note))
            out.flush()
            print("%s %s %s b%d c%d: %.0f us (layers %.0f, head %.0f)" %
                  (model, mode, precision, batch, context, both, layers,
                   head), flush=True)
            del step
            torch.cuda.empty_cache()
    if args.kernels:
        with open(args.kernels, "w", newline="") as out:
            writer = csv.DictWriter(out, ["model", "linear", "mode",
                                          "precision",
                                          "batch", "context", "kind",
                                          "calls", "micros", "name"])
            writer.writeheader()
            writer.writerows(kernel_rows)
    print("measured in %.0f s" % (time.time() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Measures how a kernel slows while another kernel holds some of the SMs.

stagec's step clock (lib/Perf/HeldUnits.cpp) runs compute beside a kernel
that holds h of a device's U SMs (DeepEP's normal dispatch and combine
hold 20) slower by U / (U - h) over the part of its time its FLOPs bound.
This script measures what holding SMs does, on one NVIDIA GPU. A holder
kernel of h thread blocks, each asking for 200 KB of shared memory so that
no other block shares its SM, spins on the global timer for longer than
the timed region; on another stream the timed region runs back-to-back
calls of one kernel of the templates' shapes: bf16 and FP8 GEMMs (large
ones, one whose tiles make 1.2 waves, a DeepSeek-V3 shared expert's, a
decode GEMM streaming its weight), the experts' grouped GEMMs of a
DeepSeek-V3 prefill on ep 32 and a Qwen3-30B-A3B training step on ep 8,
cuDNN's fused attention forward and backward, and memory-bound kernels
(adds of 8 to 512 MB, a copy, RMSNorm and SiLU-and-multiply over a
prefill's 8192 tokens). Kernels shorter than a launch from Python run as
one CUDA graph of the region's calls. Each case runs alone and beside
holders of 8 to 66 SMs; the eager GEMMs also with PyTorch's cuBLAS SM
carve-out set to h (cuBLAS then sizes its grid for the SMs left, as
Transformer Engine and DeepEP-aware frameworks ask it to), and with that
carve-out alone.

Each row: the case, h, the carve-out, the median time of the region's
call over seven regions, the time alone, the slowdown measured and that
of a kernel bound by FLOPs (U / (U - h)), and whether the holder outlasted
the region (a row where it did not is not a measurement of overlap).

  python3 bench/gpu/measure_held_sms.py -o held-sms.csv     # on the GPU
  python3 bench/gpu/measure_held_sms.py --list              # cases only
"""

import argparse
import csv
import statistics
import sys

FIELDS = ["case", "op", "precision", "shape", "sms", "held_sms", "carveout",
          "micros", "alone_micros", "slowdown", "compute_bound_slowdown",
          "holder_outlasted", "note"]

HELD = [8, 16, 20, 24, 32, 48, 66]
HOLDER_SHARED_BYTES = 200 * 1024
REGIONS = 7

HOLDER_SOURCE = r"""
extern "C" __global__ void hold_sms(unsigned long long nanos, int *started,
                                    int *sm_of_block) {
  extern __shared__ char reserved[];
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  if (threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    reserved[0] = 0;
    sm_of_block[blockIdx.x] = sm;
    atomicAdd(started, 1);
  }
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanos);
}
"""

# (case, op, precision, shape): the kernels timed.
CASES = [
    ("gemm-8192", "gemm", "bf16", (8192, 8192, 8192)),
    ("gemm-tail", "gemm", "bf16", (4096, 1280, 8192)),
    ("dsv3-shared-fc1", "gemm", "bf16", (4096, 4096, 7168)),
    ("gemm-8192", "gemm", "fp8", (8192, 8192, 8192)),
    ("dsv3-shared-fc1", "gemm", "fp8", (4096, 4096, 7168)),
    # Llama-3-70B on tp 4, the MLP's gate and up GEMM of 8192 tokens.
    ("70b-tp4-fc1", "gemm", "bf16", (8192, 7168, 8192)),
    # 8 local experts of DeepSeek-V3 on ep 32, 1024 tokens each.
    ("dsv3-experts-fc1", "grouped", "bf16", (8, 1024, 4096, 7168)),
    # 16 local experts of Qwen3-30B-A3B on ep 8, 4096 tokens each.
    ("qwen3-30b-experts-fc1", "grouped", "bf16", (16, 4096, 1536, 2048)),
    # Llama-3-70B on tp 4: 16 heads of 8192 tokens, head size 128.
    ("attn-70b-tp4", "attention", "bf16", (16, 8192, 128)),
    ("attn-70b-tp4", "attention-bwd", "bf16", (16, 8192, 128)),
    ("add-512MB", "add", "bf16", (256 << 20,)),
    ("copy-512MB", "copy", "bf16", (256 << 20,)),
    # Smaller memory-bound kernels, and those of a prefill's layer
    # (8192 tokens of DeepSeek-V3): a decode GEMM streaming its weight.
    ("add-8MB", "add", "bf16", (4 << 20,)),
    ("add-32MB", "add", "bf16", (16 << 20,)),
    ("decode-gemm-64", "gemm", "bf16", (64, 7168, 4096)),
    ("rmsnorm-8192x7168", "rmsnorm", "bf16", (8192, 7168)),
    ("silu-mul-8192x2048", "silu-mul", "bf16", (8192, 2048)),
]


def make_call(torch, op, precision, shape):
    """A call of the case's kernel over two rotating operand sets."""
    dev = "cuda"
    bf16 = torch.bfloat16

    def one():
        if op == "gemm":
            m, n, k = shape
            if precision == "fp8":
                f8 = torch.float8_e4m3fn
                a = torch.randn(m, k, device=dev, dtype=bf16).to(f8)
                b = torch.randn(n, k, device=dev, dtype=bf16).to(f8).t()
                s = torch.ones((), device=dev, dtype=torch.float32)
                return lambda: torch._scaled_mm(a, b, s, s, out_dtype=bf16,
                                                use_fast_accum=True)
            a = torch.randn(m, k, device=dev, dtype=bf16)
            b = torch.randn(n, k, device=dev, dtype=bf16).t()
            c = torch.empty(m, n, device=dev, dtype=bf16)
            return lambda: torch.matmul(a, b, out=c)
        if op == "grouped":
            groups, m, n, k = shape
            a = torch.randn(groups * m, k, device=dev, dtype=bf16)
            b = torch.randn(groups, n, k, device=dev, dtype=bf16).transpose(
                1, 2)
            ends = torch.arange(m, groups * m + 1, m, device=dev,
                                dtype=torch.int32)
            return lambda: torch._grouped_mm(a, b, offs=ends, out_dtype=bf16)
        if op.startswith("attention"):
            import torch.nn.functional as F
            heads, seq, hd = shape
            grad = op.endswith("bwd")
            q, k, v = (torch.randn(1, heads, seq, hd, device=dev, dtype=bf16,
                                   requires_grad=grad) for _ in range(3))
            if not grad:
                return lambda: F.scaled_dot_product_attention(
                    q, k, v, is_causal=True)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            dout = torch.randn_like(out)
            return lambda: torch.autograd.grad(out, (q, k, v), dout,
                                               retain_graph=True)
        if op == "rmsnorm":
            rows, width = shape
            x = torch.randn(rows, width, device=dev, dtype=bf16)
            w = torch.randn(width, device=dev, dtype=bf16)
            return lambda: torch.nn.functional.rms_norm(x, (width,), w)
        if op == "silu-mul":
            rows, width = shape
            x = torch.randn(rows, 2 * width, device=dev, dtype=bf16)
            return lambda: (torch.nn.functional.silu(x[:, :width]) *
                            x[:, width:])
        (elements,) = shape
        x = torch.randn(elements, device=dev, dtype=bf16)
        y = torch.randn(elements, device=dev, dtype=bf16)
        out = torch.empty_like(x)
        if op == "add":
            return lambda: torch.add(x, y, out=out)
        return lambda: out.copy_(x)

    calls = [one(), one()]
    return lambda i: calls[i % 2]()


class Holder:
    """h thread blocks that each hold an SM for a given time."""

    def __init__(self, torch):
        import cupy
        self.torch, self.cupy = torch, cupy
        self.kernel = cupy.RawKernel(HOLDER_SOURCE, "hold_sms")
        self.kernel.max_dynamic_shared_size_bytes = HOLDER_SHARED_BYTES
        self.started = cupy.zeros(1, dtype=cupy.int32)
        self.sm_of_block = cupy.zeros(1024, dtype=cupy.int32)
        self.stream = torch.cuda.Stream()

    def distinct_sms(self, blocks):
        """The SMs `blocks` blocks of one launch ran on: as many as the
        blocks if each holds its own SM."""
        self.sm_of_block.fill(-1)
        self.torch.cuda.synchronize()
        self.launch(blocks, 1000)
        self.torch.cuda.synchronize()
        return len(set(self.sm_of_block.get()[:blocks].tolist()))

    def launch(self, blocks, micros):
        with self.torch.cuda.stream(self.stream):
            with self.cupy.cuda.ExternalStream(self.stream.cuda_stream):
                self.kernel((blocks,), (128,),
                            (self.cupy.uint64(int(micros * 1000)),
                             self.started, self.sm_of_block),
                            shared_mem=HOLDER_SHARED_BYTES)


def time_region(torch, region, repeats, holder=None, blocks=0):
    """Microseconds a call in `region`, `repeats` calls, and whether a
    holder launched first outlasted it."""
    main = torch.cuda.current_stream()
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    held_start, held_end = (torch.cuda.Event(enable_timing=True)
                            for _ in range(2))
    outlasted = True
    if holder:
        held_start.record(holder.stream)
        holder.launch(blocks, time_region.holder_micros)
        held_end.record(holder.stream)
        # Let the holder's blocks take their SMs before the region starts.
        torch.cuda._sleep(200000)
    start.record(main)
    region()
    end.record(main)
    torch.cuda.synchronize()
    if holder:
        region_end = held_start.elapsed_time(end)
        outlasted = (held_start.elapsed_time(start) >= 0
                     and region_end < held_start.elapsed_time(held_end))
    return start.elapsed_time(end) * 1000 / repeats, outlasted


def measure(torch, holder, case, writer, carveout_setter):
    name, op, precision, shape = case
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    call = make_call(torch, op, precision, shape)
    for i in range(3):
        call(i)
    torch.cuda.synchronize()
    # Regions of about 3 ms.
    once, _ = time_region(torch, lambda: [call(i) for i in range(3)], 3)
    repeats = max(3, min(200, int(3000 / max(once, 1))))
    graphed = is_short(op, shape)
    if graphed:
        # Kernels shorter than a launch from Python: one CUDA graph of the
        # region's calls.
        repeats = 200
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(3):
                call(i)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(repeats):
                call(i)
        region = graph.replay
    else:
        def region():
            for i in range(repeats):
                call(i)
    alone = statistics.median(time_region(torch, region, repeats)[0]
                              for _ in range(REGIONS))
    note = ", one CUDA graph" if graphed else ""
    time_region.holder_micros = 3 * alone * repeats + 2000
    base = dict(case=name, op=op, precision=precision,
                shape="x".join(str(s) for s in shape), sms=sms)
    writer.writerow(dict(base, held_sms=0, carveout=0,
                         micros="%.3f" % alone, alone_micros="%.3f" % alone,
                         slowdown="1.000", compute_bound_slowdown="1.000",
                         holder_outlasted="", note="repeats %d%s" % (repeats, note)))
    carveouts = [0]
    if op == "gemm" and not graphed and carveout_setter:
        carveouts.append(None)  # None: the carve-out equal to the held SMs
    for held in HELD:
        for carve in carveouts:
            carve_sms = held if carve is None else 0
            if carveout_setter:
                carveout_setter(carve_sms)
            try:
                call(0)  # a new carve-out picks its kernel outside the region
                torch.cuda.synchronize()
                if carve_sms:
                    # The carve-out alone: fewer SMs asked for, none held.
                    micros = statistics.median(
                        time_region(torch, region, repeats)[0]
                        for _ in range(REGIONS))
                    writer.writerow(dict(
                        base, held_sms=0, carveout=carve_sms,
                        micros="%.3f" % micros, alone_micros="%.3f" % alone,
                        slowdown="%.3f" % (micros / alone),
                        compute_bound_slowdown="%.3f" % (sms / (sms - held)),
                        holder_outlasted="", note="repeats %d%s" % (repeats, note)))
                results = [time_region(torch, region, repeats, holder, held)
                           for _ in range(REGIONS)]
            finally:
                if carveout_setter:
                    carveout_setter(0)
            micros = statistics.median(r[0] for r in results)
            writer.writerow(dict(
                base, held_sms=held, carveout=carve_sms,
                micros="%.3f" % micros, alone_micros="%.3f" % alone,
                slowdown="%.3f" % (micros / alone),
                compute_bound_slowdown="%.3f" % (sms / (sms - held)),
                holder_outlasted=int(all(r[1] for r in results)),
                note="repeats %d%s" % (repeats, note)))
    sys.stdout.flush()


def is_short(op, shape):
    """Whether the case's kernels are too short to time as eager calls."""
    if op == "gemm":
        return shape[0] <= 64
    if op in ("add", "copy"):
        return shape[0] < (64 << 20)
    return op in ("rmsnorm", "silu-mul")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="held-sms.csv")
    parser.add_argument("--list", action="store_true",
                        help="print the cases and exit")
    parser.add_argument("--only", default="",
                        help="comma-separated case names to run")
    parser.add_argument("--blas", choices=["default", "cublaslt"],
                        default="default",
                        help="the BLAS library torch prefers for GEMMs")
    args = parser.parse_args()
    cases = [case for case in CASES
             if not args.only or case[0] in args.only.split(",")]
    if args.list:
        for case in cases:
            print(*case)
        return 0
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.blas != "default":
        torch.backends.cuda.preferred_blas_library(args.blas)
    holder = Holder(torch)
    setter = getattr(torch._C, "_set_sm_carveout_experimental", None)
    print("torch %s, cuda %s, cudnn %s, %s, carve-out %s" % (
        torch.__version__, torch.version.cuda, torch.backends.cudnn.version(),
        torch.cuda.get_device_name(0), "yes" if setter else "no"))
    for blocks in (20, 66):
        print("holder of %d blocks ran on %d SMs" % (
            blocks, holder.distinct_sms(blocks)))
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with open(args.output, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for case in cases:
            try:
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    measure(torch, holder, case, writer, setter)
            except Exception as error:  # noqa: BLE001 - keep measuring
                torch.cuda.synchronize()
                print("skipped %s: %s" % (case[0], str(error)[:300]))
            out.flush()
            print("done", case[0], case[2], case[1])
    print("holder blocks started:", int(holder.started.get()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-GPU-type figures the LLM model needs beyond the catalogue: 16-bit tensor throughput,
memory the runtime takes outside tensors, and cuBLAS workspace.

Keyed by the names of `estimator.catalogue.CATALOGUE` (a test checks every catalogue type
has an entry). Pure data, no torch.

``tflops``: dense (no sparsity) 16-bit matrix throughput with fp32 accumulation, as PyTorch
runs it, from NVIDIA's data sheets and architecture whitepapers: bf16 where the GPU has it,
fp16 on Volta and Turing, fp32 on the K80 (no tensor cores; one of the board's two GPUs,
2496 cores x 2 x 875 MHz). GeForce cards accumulate in fp32 at half their fp16-accumulate
rate (Turing, Ampere and Ada whitepapers), which halves their headline figure.

``context_mib``: what a PyTorch process holds outside the caching allocator once an LLM step
has run: the CUDA context with lazily loaded kernel modules (PyTorch sets
CUDA_MODULE_LOADING=LAZY since 1.13; its PR #86509 measured 287 MB for a bare context vs
667 MB eager; a PyTorch maintainer quotes ~300-400 MB), plus the GEMM, attention and
normalisation kernels a transformer step loads and cuBLASLt's own workspace. We take
768 MiB for Volta to Ada and 1024 MiB for Hopper (larger kernels and workspaces; vLLM's
profiler reported 1.79 GiB outside torch for Llama-3-8B on an H100, PR #10511, which
these figures do not reach: the held-out pad covers it). The K80 needs CUDA <= 11.4 (no lazy
loading: every kernel loaded, > 1000 MB per the same maintainer), 1024 MiB.

``cublas_workspace_mib``: cuBLAS workspaces PyTorch allocates through its caching allocator
(CUBLAS_WORKSPACE_CONFIG defaults: 2 x 4 MiB + 8 x 16 KiB before Hopper, 8 x 4 MiB on
Hopper), plus 64 MiB for small framework buffers (RNG state, loss scalars, index tensors).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.catalogue import CATALOGUE, GpuType, get_gpu


@dataclass(frozen=True)
class LlmGpuSpec:
    tflops: float
    generation: str
    context_mib: float
    workspace_mib: float


_MISC_MIB = 64.0
_PRE_HOPPER_WS = 8.125 + _MISC_MIB
_HOPPER_WS = 32.0 + _MISC_MIB


def _spec(tflops: float, generation: str) -> LlmGpuSpec:
    context = {"kepler": 1024.0, "hopper": 1024.0}.get(generation, 768.0)
    workspace = _HOPPER_WS if generation == "hopper" else _PRE_HOPPER_WS
    return LlmGpuSpec(tflops, generation, context, workspace)


LLM_GPU_SPECS: dict[str, LlmGpuSpec] = {
    "K80": _spec(4.37, "kepler"),
    "RTX-2070S": _spec(36.3, "turing"),  # 72.5 with fp16 accumulation
    "RTX-3070": _spec(40.6, "ampere"),  # 81.3 with fp16 accumulation
    "V100-16GB": _spec(125.0, "volta"),  # SXM2
    "RTX-3090": _spec(71.0, "ampere"),  # 142 with fp16 accumulation
    "T4": _spec(65.0, "turing"),
    "V100-32GB": _spec(125.0, "volta"),
    "A10": _spec(125.0, "ampere"),
    "L4": _spec(121.0, "ada"),
    "A40": _spec(149.7, "ampere"),
    "RTX-A6000": _spec(154.8, "ampere"),
    "RTX-4090": _spec(165.2, "ada"),  # 330 with fp16 accumulation
    "L40S": _spec(362.0, "ada"),
    "A100-40GB": _spec(312.0, "ampere"),
    "A100-80GB": _spec(312.0, "ampere"),
    "H100-PCIe": _spec(756.0, "hopper"),
    "H100-80GB": _spec(989.0, "hopper"),  # SXM
    "H200": _spec(989.0, "hopper"),
}


def resolve(gpu: str | GpuType) -> tuple[GpuType, LlmGpuSpec]:
    """The catalogue entry and LLM figures for a type name, product label or `GpuType`.

    Raises `UnknownGPU` (from the catalogue) for names it does not know.
    """
    gpu_type = gpu if isinstance(gpu, GpuType) else get_gpu(gpu)
    return gpu_type, LLM_GPU_SPECS[gpu_type.name]


__all__ = ["CATALOGUE", "LLM_GPU_SPECS", "LlmGpuSpec", "resolve"]

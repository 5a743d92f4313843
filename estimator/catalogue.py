"""GPU catalogue: characteristics per GPU type and the product-label mapping.

The five GPUs of the paper's Table I carry exactly the values the authors'
data uses; the others come from NVIDIA's data sheets. Memory clock is the
effective data rate in MHz as in Table I (GDDR: e.g. 14000 for 14 Gbps; HBM:
twice the memory clock). `memory_mib` is the total NVML reports, which is what
GPU Feature Discovery writes to ``nvidia.com/gpu.memory`` (for the two 8 GB
GeForce cards, the 7982 MiB the paper reports usable: the authors' data marks
everything above it as out of memory); a node's own label wins when present.

`gpu_for_product` maps ``nvidia.com/gpu.product`` values (GFD replaces spaces
with hyphens; device-plugin time-slicing may append ``-SHARED``) to a type.
Unknown products, MIG slices included, give ``None``: never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.errors import UnknownGPU


@dataclass(frozen=True)
class GpuType:
    name: str
    cuda_cores: int
    tensor_cores: int
    mem_bandwidth_gbs: float
    sm_count: int
    mem_clock_mhz: float
    memory_mib: int
    products: tuple[str, ...]


#: Column order of the GPU characteristics wherever they are features.
CHARACTERISTICS = ("cuda_cores", "tensor_cores", "mem_bandwidth_gbs", "sm_count", "mem_clock_mhz")

_TYPES = (
    # The paper's Table I (values as in the authors' data).
    GpuType("K80", 2496, 0, 240.6, 13, 5012, 11441, ("Tesla-K80",)),
    GpuType("RTX-2070S", 2560, 320, 448.0, 40, 14000, 7982,
            ("NVIDIA-GeForce-RTX-2070-SUPER", "GeForce-RTX-2070-SUPER")),
    GpuType("RTX-3070", 5888, 184, 512.0, 46, 16000, 7982,
            ("NVIDIA-GeForce-RTX-3070", "GeForce-RTX-3070")),
    GpuType("V100-16GB", 5120, 640, 900.0, 80, 1752, 16384,
            ("Tesla-V100-SXM2-16GB", "Tesla-V100-PCIE-16GB", "Tesla-V100-SXM2-16GB-N")),
    GpuType("RTX-3090", 10496, 328, 935.8, 82, 19495, 24576,
            ("NVIDIA-GeForce-RTX-3090", "GeForce-RTX-3090")),
    # Common data-centre and workstation GPUs (data sheets).
    GpuType("T4", 2560, 320, 320.0, 40, 10000, 15360, ("Tesla-T4", "NVIDIA-T4")),
    GpuType("V100-32GB", 5120, 640, 900.0, 80, 1752, 32768,
            ("Tesla-V100-SXM2-32GB", "Tesla-V100-PCIE-32GB", "Tesla-V100S-PCIE-32GB")),
    GpuType("A10", 9216, 288, 600.0, 72, 12502, 23028, ("NVIDIA-A10",)),
    GpuType("L4", 7424, 232, 300.0, 58, 12501, 23034, ("NVIDIA-L4",)),
    GpuType("A40", 10752, 336, 696.0, 84, 14500, 46068, ("NVIDIA-A40",)),
    GpuType("RTX-A6000", 10752, 336, 768.0, 84, 16000, 49140, ("NVIDIA-RTX-A6000",)),
    GpuType("RTX-4090", 16384, 512, 1008.0, 128, 21000, 24564, ("NVIDIA-GeForce-RTX-4090",)),
    GpuType("L40S", 18176, 568, 864.0, 142, 18000, 46068, ("NVIDIA-L40S",)),
    GpuType("A100-40GB", 6912, 432, 1555.0, 108, 2430, 40960,
            ("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB", "A100-SXM4-40GB", "A100-PCIE-40GB")),
    GpuType("A100-80GB", 6912, 432, 2039.0, 108, 3186, 81920,
            ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe", "A100-SXM4-80GB", "A100-80GB-PCIe")),
    GpuType("H100-PCIe", 14592, 456, 2000.0, 114, 3190, 81559, ("NVIDIA-H100-PCIe",)),
    GpuType("H100-80GB", 16896, 528, 3350.0, 132, 5240, 81559,
            ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-SXM5-80GB")),
    GpuType("H200", 16896, 528, 4800.0, 132, 6400, 143771, ("NVIDIA-H200", "NVIDIA-H200-NVL")),
)  # fmt: skip

CATALOGUE: dict[str, GpuType] = {t.name: t for t in _TYPES}
_SHARED_SUFFIX = "-shared"
_BY_PRODUCT: dict[str, GpuType] = {
    alias.lower(): t for t in _TYPES for alias in (*t.products, t.name)
}


def _normalise(product: str) -> str:
    key = "-".join(product.strip().split()).lower()
    return key.removesuffix(_SHARED_SUFFIX)


def gpu_for_product(product: str) -> GpuType | None:
    """The catalogue entry for a GFD product label (or type name), else None."""
    if not isinstance(product, str) or not product.strip():
        return None
    return _BY_PRODUCT.get(_normalise(product))


def get_gpu(name: str) -> GpuType:
    """A catalogue entry by type name or product label; `UnknownGPU` lists the names."""
    gpu = gpu_for_product(name)
    if gpu is None:
        raise UnknownGPU(f"unknown GPU {name!r}; catalogue: {', '.join(CATALOGUE)}")
    return gpu


def characteristics(gpu: GpuType) -> tuple[float, ...]:
    """The GPU's characteristics in `CHARACTERISTICS` order."""
    return tuple(float(getattr(gpu, c)) for c in CHARACTERISTICS)


#: The authors' data identifies GPUs by CUDA cores (and the file names by label).
PAPER_GPUS_BY_CUDA_CORES = {2496: "K80", 2560: "RTX-2070S", 5888: "RTX-3070",
                            5120: "V100-16GB", 10496: "RTX-3090"}
PAPER_GPUS_BY_LABEL = {"Tesla K80": "K80", "RTX 2070 SUPER": "RTX-2070S", "RTX 3070": "RTX-3070",
                       "Tesla V100": "V100-16GB", "RTX 3090": "RTX-3090"}

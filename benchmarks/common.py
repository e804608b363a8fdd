"""Shared helpers for the neuron-vs-CPU benchmarks.

Every benchmark times the same work on device "cpu" and device "neuron" in the
same process, interleaving the two so that load drift (this is a 2-core
machine) hits both alike, and reports ratios. Nothing here asserts on time.

Knobs (environment):
  NEURON_BENCH_REPEATS            timed repeats per measurement (median taken); default per benchmark
  NEURON_BENCH_THREADS            torch.set_num_threads() before measuring; default: torch's own choice
  NEURON_BENCH_FP32_PEAK_GFLOPS   fp32 FMA peak of the machine; default: measured (see fp32_peak_gflops)
"""
from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys
import platform
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional

import torch

NEURON = "neuron"
MiB = 1 << 20

# A benchmark run is one job whose processes take turns on the cores (the
# parent measures, then starts ranks or children on the same cores): they
# share, where a user's unrelated processes would each claim their own.
os.environ.setdefault("TORCH_NEURONX_SHARE_CORES", "1")

if not hasattr(torch, "neuron"):  # autoload disabled: load the plugin explicitly
    import torch_neuronx  # noqa: F401

_threads = os.environ.get("NEURON_BENCH_THREADS")
if _threads:
    torch.set_num_threads(int(_threads))


# --------------------------------------------------------------------------- timing

def sync(device: str) -> None:
    if device == NEURON:
        torch.neuron.synchronize()


def repeats(default: int) -> int:
    return int(os.environ.get("NEURON_BENCH_REPEATS", default))


def _cpu_ticks() -> tuple[int, int]:
    """(busy ticks of the whole machine incl. steal, ticks of this process)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
        with open("/proc/self/stat") as f:
            own = f.read().rsplit(")", 1)[1].split()
        user, nice, system, idle, iowait, irq, softirq, steal = fields
        return user + nice + system + irq + softirq + steal, int(own[11]) + int(own[12])
    except (OSError, ValueError, IndexError):
        return 0, 0


class Timing(float):
    """Median seconds per call (a float), with the repeats' relative spread and
    the share of the machine's CPU time that other processes used meanwhile."""

    samples: List[float]
    others: float = 0.0

    def __new__(cls, samples: List[float]) -> "Timing":
        median = statistics.median(samples)
        self = super().__new__(cls, median)
        self.samples = samples
        return self

    @property
    def rel_mad(self) -> float:
        """Median absolute deviation of the repeats, relative to the median."""
        return statistics.median(abs(s - self) for s in self.samples) / self if self else 0.0


def others_share(*timings: "Timing") -> float:
    """The largest share of all CPUs that other processes used while these were measured."""
    return max((t.others for t in timings if isinstance(t, Timing)), default=0.0)


def ratio_noise(*timings: "Timing") -> float:
    """Relative noise of a ratio of these measurements (sum of their relative MADs)."""
    return sum(t.rel_mad for t in timings if isinstance(t, Timing))


def time_interleaved(fns: Dict[str, Callable[[], object]], *, devices: Optional[Dict[str, str]] = None,
                     inner: int = 1, warmup: int = 1, reps: int = 5,
                     clock: Callable[[], float] = time.perf_counter, settle: float = 0.0) -> Dict[str, Timing]:
    """Median seconds per call of each fn (a Timing: a float that keeps the samples).

    fns maps a label to a zero-argument callable; devices maps the label to
    the device it runs on ("cpu" or "neuron", default: the label itself),
    which decides whether the device is synchronized before the clock starts
    and stops. Each repeat calls the fn `inner` times in a row. Repeats of the
    different labels are interleaved (a, b, a, b, ...), and the median of
    `reps` repeats is returned. clock is wall time by default; time.process_time
    (CPU time of all threads of this process) suits single-threaded work on a
    loaded machine, as time spent preempted does not count. settle seconds of
    sleep before each timed repeat let the previous fn's idle threads (OpenBLAS
    workers spin for about 0.1 s after a GEMM) go to sleep, so that one
    device's leftovers do not slow the other's bandwidth-bound work.
    """
    devices = devices or {}
    samples: Dict[str, List[float]] = {k: [] for k in fns}
    busy0, own0 = _cpu_ticks()
    wall0 = time.perf_counter()
    for k, fn in fns.items():
        dev = devices.get(k, k)
        for _ in range(warmup):
            for _ in range(inner):
                fn()
            sync(dev)
    for _ in range(reps):
        for k, fn in fns.items():
            dev = devices.get(k, k)
            sync(dev)
            if settle:
                time.sleep(settle)
            t0 = clock()
            for _ in range(inner):
                fn()
            sync(dev)
            samples[k].append((clock() - t0) / inner)
    busy1, own1 = _cpu_ticks()
    ticks = (time.perf_counter() - wall0) * os.sysconf("SC_CLK_TCK") * (os.cpu_count() or 1)
    out = {k: Timing(v) for k, v in samples.items()}
    for t in out.values():
        t.others = max(0.0, min(1.0, ((busy1 - busy0) - (own1 - own0)) / ticks)) if ticks > 0 else 0.0
    return out


def single_thread_clock() -> tuple[Callable[[], float], str]:
    """The clock for work that runs on the calling thread alone: process CPU
    time while torch runs one intra-op thread (preemption by other processes
    then does not count), else wall time. Returns (clock, its name)."""
    if torch.get_num_threads() == 1:
        return time.process_time, "process CPU time"
    return time.perf_counter, "wall time"


# --------------------------------------------------------------------------- machine facts

_memcpy_cache: Dict[int, float] = {}


def memcpy_bandwidth(nbytes: int = 256 * MiB, reps: int = 5) -> float:
    """Machine memcpy bandwidth in bytes/s: CPU->CPU dst.copy_(src) of nbytes,
    counting read + write (2 * nbytes) per copy, in wall time. Cached per size
    for the run."""
    if nbytes not in _memcpy_cache:
        src = torch.empty(nbytes // 4, dtype=torch.float32).fill_(1.0)
        dst = torch.empty_like(src)
        t = time_interleaved({"cpu": lambda: dst.copy_(src)}, warmup=2, reps=repeats(reps))["cpu"]
        _memcpy_cache[nbytes] = 2 * nbytes / t
        del src, dst
    return _memcpy_cache[nbytes]


_read_cache: Dict[int, float] = {}


def read_bandwidth(nbytes: int = 1 << 30, reps: int = 5) -> float:
    """Machine read bandwidth in bytes/s: the faster of two reductions over nbytes of fp32 on all
    cores, in wall time: the CPU device's sum() and a matrix-vector product (each row a dot
    product; on the Xeon VM of 2026-12-05 the sum read 25 GB/s and the product 31). Decoding
    reads its weights and writes almost nothing, so this, not a copy (which also writes every
    byte), is its floor; taking the faster reduction keeps the floor from being lenient where
    one of them does not reach the memory's rate. Cached per size."""
    if nbytes not in _read_cache:
        data = torch.empty(nbytes // 4, dtype=torch.float32).fill_(1.0)
        matrix, vector = data.view(-1, 4096), torch.ones(4096)
        threads = torch.get_num_threads()
        torch.set_num_threads(len(os.sched_getaffinity(0)))  # torch may count fewer cores than there are
        try:
            t = time_interleaved({"sum": lambda: data.sum(), "mv": lambda: torch.mv(matrix, vector)},
                                 devices={"sum": "cpu", "mv": "cpu"}, warmup=2, reps=repeats(reps), settle=0.15)
        finally:
            torch.set_num_threads(threads)
        _read_cache[nbytes] = nbytes / min(t.values())
        del data, matrix
    return _read_cache[nbytes]


def last_level_cache_bytes() -> int:
    """The largest CPU cache, from sysfs or, where the environment hides sysfs (./dev's sandbox),
    from the C library's CPUID-based sysconf; 32 MiB when neither says."""
    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            text = open(path).read().strip()
            sizes.append(int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1))
        except (OSError, ValueError):
            continue
    for level in (2, 3, 4):
        try:
            out = subprocess.run(["getconf", f"LEVEL{level}_CACHE_SIZE"], capture_output=True, text=True, timeout=10)
            sizes.append(int(out.stdout.strip() or 0))
        except (OSError, ValueError, subprocess.SubprocessError):
            continue
    return max([s for s in sizes if s > 0], default=32 * MiB)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "?"


def cpu_features() -> str:
    """The SIMD features that choose the device's kernels, as the CPU reports them."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next(l for l in f if l.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        pass
    wanted = ["avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"]
    return " ".join(f for f in wanted if f in flags) or "none of avx2/avx512/amx"


def cpu_kind_env(level: str) -> dict:
    """os.environ with the device and torch both lowered to the CPU kind `level` (env/cpu_kinds.py)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "env"))
    import cpu_kinds

    return cpu_kinds.environment(level)


def torch_code_levels() -> str:
    """The code torch's CPU device runs: ATen's kernels, and what forced oneDNN and OpenBLAS down."""
    forced = [f"{name}={os.environ[name]}" for name in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
              if name in os.environ]
    return f"ATen {torch.backends.cpu.get_cpu_capability()}" + (f" ({', '.join(forced)})" if forced else "")


def simd_in_use() -> str:
    """The level the device's kernels run at (TORCH_NEURONX_SIMD may lower the CPU's)."""
    import torch_neuronx

    forced = os.environ.get("TORCH_NEURONX_SIMD")
    return torch_neuronx._C._simd_level() + (f" (forced by TORCH_NEURONX_SIMD={forced})" if forced else "")


def _fma_peak_program() -> str:
    """benchmarks/fma_peak.c built with the environment's C compiler, once per version of its source."""
    import hashlib
    import tempfile

    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fma_peak.c")
    digest = hashlib.sha256(open(source, "rb").read()).hexdigest()[:16]
    program = os.path.join(tempfile.gettempdir(), f"torch-neuronx-fma-peak-{digest}")
    if not os.path.exists(program):
        built = program + f".{os.getpid()}"
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-pthread", "-o", built, source], check=True,
                       capture_output=True, text=True, timeout=300)
        os.replace(built, program)
    return program


def fma_level() -> str:
    """The widest fp32 FMA the device's kernels use: avx512 or avx2 (TORCH_NEURONX_SIMD may lower the CPU's)."""
    import torch_neuronx

    level = torch_neuronx._C._simd_level()
    return "avx512" if level.startswith("avx512") or level.startswith("amx") else "avx2"


_peak_cache: Dict[str, tuple[float, str]] = {}


def fp32_peak_gflops(level: Optional[str] = None) -> tuple[float, str]:
    """The fp32 FMA peak on all cores at `level` (default fma_level()), measured in this run, and how it
    was obtained.

    benchmarks/fma_peak.c runs independent register FMA chains on every core at
    the device's SIMD width (fma_level()): a peak computed from /proc/cpuinfo
    takes the base clock (boost runs higher) and assumes two FMA units, and on
    a 2-core AMD EPYC Zen 5 the measurement gave twice the figure once assumed.
    NEURON_BENCH_FP32_PEAK_GFLOPS overrides it; without a C compiler the
    /proc/cpuinfo estimate is used and says so. Cached for the run.
    """
    env = os.environ.get("NEURON_BENCH_FP32_PEAK_GFLOPS")
    if env:
        return float(env), f"NEURON_BENCH_FP32_PEAK_GFLOPS={env}"
    level, cores = level or fma_level(), len(os.sched_getaffinity(0))
    if level not in _peak_cache:
        _peak_cache[level] = _measure_fp32_peak(level, cores)
    return _peak_cache[level]


def _measure_fp32_peak(level: str, cores: int) -> tuple[float, str]:
    try:
        out = subprocess.run([_fma_peak_program(), level, str(cores)], capture_output=True, text=True,
                             timeout=120, check=True)
        one = subprocess.run([_fma_peak_program(), level, "1"], capture_output=True, text=True,
                             timeout=120, check=True)
        return float(out.stdout), (f"measured: {level} FMA chains on {cores} cores, best of 5 "
                                   f"(one core {float(one.stdout):.0f} GFLOP/s)")
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        return _fp32_peak_estimate(level, cores), f"/proc/cpuinfo estimate, not measured ({error})"


def _fp32_peak_estimate(level: str, cores: int) -> float:
    """cores x base GHz x 2 (multiply and add) x lanes x 2 FMA units."""
    mhz = 0.0
    try:
        with open("/proc/cpuinfo") as f:
            mhz = float(next(line for line in f if line.startswith("cpu MHz")).split(":", 1)[1])
    except (OSError, StopIteration, ValueError):
        pass
    return cores * mhz / 1e3 * 2 * (16 if level == "avx512" else 8) * 2


def openblas_core() -> str:
    for path in sorted(glob.glob("/usr/lib/*/openblas*/libopenblas*.so*") + glob.glob("/usr/lib/*/libopenblas*.so*")):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return f"{lib.openblas_get_corename().decode()} ({lib.openblas_get_num_threads()} threads)"
        except (OSError, AttributeError):
            continue
    return "unknown"


def environment_lines() -> List[str]:
    model = cpu_model()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        import subprocess
        rev = subprocess.run(["git", "-C", repo, "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        rev = "?"
    import torch_neuronx
    so = torch_neuronx._C.__file__
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(so)))
    lines = [
        f"torch {torch.__version__}, CPU {model}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
        f"OpenBLAS core {openblas_core()} (OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}), "
        f"neuron devices {torch.neuron.device_count()}",
        f"CPU features {cpu_features()}; device kernels' SIMD level {simd_in_use()}; torch's {torch_code_levels()}; "
        f"last-level cache {last_level_cache_bytes() / MiB:.0f} MiB",
        f"torch_neuronx at git {rev}, _C built {built}",
        f"load average at start: {load}",
    ]
    if os.getloadavg()[0] > 0.5:
        lines.append("WARNING: the machine is not idle; timings are noisy (CPU and neuron repeats are interleaved, "
                     "so ratios suffer less than absolute numbers)")
    return lines


# --------------------------------------------------------------------------- results

@dataclass
class Row:
    benchmark: str
    cpu: str
    neuron: str
    ratio: Optional[float]           # neuron/cpu time, or achieved fraction
    ratio_kind: str                  # "time" (lower is better) or "fraction" (higher is better)
    target: Optional[float]          # threshold for ratio; None = informational
    note: str = ""
    percent: bool = False            # print a "fraction" ratio and its target as percentages
    noise: float = 0.0               # relative noise of the ratio (see ratio_noise)
    contention: float = 0.0          # share of the CPUs other processes used meanwhile (see others_share)

    @property
    def met(self) -> Optional[bool]:
        if self.target is None or self.ratio is None:
            return None
        return self.ratio <= self.target if self.ratio_kind == "time" else self.ratio >= self.target

    @property
    def within_noise(self) -> bool:
        """Missed, but by less than the measurement noise."""
        return self.met is False and abs(self.ratio / self.target - 1) <= self.noise

    def cells(self) -> List[str]:
        if self.ratio is None:
            ratio = "-"
        elif self.ratio_kind == "time":
            ratio = f"{self.ratio:.2f}x time"
        else:
            ratio = f"{self.ratio * 100:.0f}%" if self.percent else f"{self.ratio:.2f}x"
        if self.target is None:
            target = "info"
        elif self.ratio_kind == "time":
            target = f"<= {self.target:.2f}x"
        else:
            target = f">= {self.target * 100:.0f}%" if self.percent else f">= {self.target:.2f}x"
        met = {None: "-", True: "yes", False: "**NO**"}[self.met]
        if self.within_noise:
            met = f"no, within noise (±{self.noise * 100:.0f}%)"
        elif self.met is False and self.contention >= CONTENDED:
            met = f"**NO** (contended: others used {self.contention * 100:.0f}% of the CPUs)"
        return [self.benchmark, self.cpu, self.neuron, ratio, target, met]


CONTENDED = 0.25  # others' share of the CPUs from which a row is flagged as contended

HEADER = ["benchmark", "cpu", "neuron", "ratio (neuron/cpu time, or achieved)", "target", "met?"]


def markdown_table(rows: Iterable[Row]) -> str:
    body = [r.cells() for r in rows]
    widths = [max(len(HEADER[i]), *(len(c[i]) for c in body)) if body else len(HEADER[i]) for i in range(6)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [line(HEADER), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(c) for c in body]
    return "\n".join(out)


def notes(rows: Iterable[Row]) -> List[str]:
    out = []
    for r in rows:
        text = [r.note] if r.note else []
        if r.contention >= CONTENDED:
            text.append(f"measured while other processes used {r.contention * 100:.0f}% of the CPUs")
        if text:
            out.append(f"- {r.benchmark}: " + "; ".join(text))
    return out


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def main(run: Callable[[], List[Row]]) -> None:
    """Entry point of a benchmark module run on its own."""
    for line in environment_lines():
        print(line)
    t0 = time.perf_counter()
    rows = run()
    print()
    print(markdown_table(rows))
    for line in notes(rows):
        print(line)
    print(f"\n({time.perf_counter() - t0:.1f} s)")

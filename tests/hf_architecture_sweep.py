"""Hugging Face causal-LM architecture sweep: every architecture in the installed
transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, as a tiny randomly initialised
model, run on CPU and on neuron, results compared.

For each model type the default config is shrunk generically (hidden size 64,
2 layers, 4 heads, 2 KV heads, head_dim 16, FFN 64, vocab 256, 128 positions,
4 experts / top-2 for mixture-of-experts, Mamba heads 8x16, one layer of each
kind listed in layer_types, special token ids moved below the vocabulary size,
initializer_range INIT_RANGE, ...; OVERRIDES holds what a few architectures
need on top). The model is built once on CPU (seeded, fp32, eager attention,
eval mode), deep-copied to neuron (model.to("neuron"), identical weights), and
both copies run

  forward    one forward pass over a fixed prompt (a batch of two 8-token rows,
             the second left-padded by 3, attention_mask passed): the logits
             must agree within ATOL/RTOL (fp32), and
  generate   greedy generate() (do_sample=False, MAX_NEW_TOKENS new tokens):
             the token ids must be equal. A divergence where the two devices'
             logits at that step agree within ATOL/RTOL and the top two CPU
             logits are within that tolerance of each other (a near-tie that
             rounding may flip) is noted, not failed. Where generate() itself
             is broken on CPU for an architecture in this transformers release,
             generate(use_cache=False), then a plain greedy loop over forward(),
             stand in (noted in the report).

With HF_SWEEP_COMPILE=1, an architecture that passes on neuron then runs

  static     greedy generate() on neuron with cache_implementation="static",
             eagerly (disable_compile=True), and then, after
             torch._dynamo.reset(), with the decode step compiled by the
             "neuron" torch.compile backend (compile_config=
             CompileConfig(backend="neuron")); the compiled tokens must equal
             the eager StaticCache tokens, with the same near-tie allowance.
             Where they do not (or the compiled run raises), the run is
             repeated with Dynamo's own "eager" backend and the report says
             how that went: a failure there too lies in Dynamo or in the
             model's code under Dynamo, not in the neuron backend.

Each architecture runs in its own process, forked from a worker that imported
torch and transformers once (so a crash, a hang or an allocation storm takes
down that architecture only), under an address-space cap (RLIMIT_AS,
MEMORY_LIMIT_GIB, set in the child) and a wall-clock limit (TIMEOUT_S); WORKERS
workers run in parallel. Each architecture ends up in one of three classes:

  pass          CPU and neuron agree,
  cpu-fails     the tiny model does not build or run on CPU (no verdict on the
                device; listed apart, not counted),
  neuron-fails  works on CPU, but on neuron raises, crashes, times out or
                disagrees (a plugin bug),

and with HF_SWEEP_COMPILE=1 two more, for architectures that pass on neuron:

  compile-fails       the compiled StaticCache generate() raises, crashes,
                      times out or differs from the eager one (a compile
                      backend bug; pass then means the compiled run agrees),
  static-unsupported  the eager StaticCache generate() itself fails on neuron
                      (mostly architectures without StaticCache support);
                      nothing is compiled.

Usage:

    python3 tests/hf_architecture_sweep.py [REGEX] [--workers N] [--timeout S] [--json PATH] [-v]
    python3 tests/hf_architecture_sweep.py --show-config MODEL_TYPE
    python3 tests/test_hf_architectures.py [REGEX]      # the same report

REGEX filters model types (re.search). Environment: HF_SWEEP_ATTN=sdpa (SDPA
attention where the architecture has it), HF_SWEEP_PADDED=0 (one unpadded row),
HF_SWEEP_INIT_RANGE, HF_SWEEP_TIMEOUT_S, HF_SWEEP_MEMORY_LIMIT_GIB, HF_SWEEP_WORKERS,
HF_SWEEP_COMPILE=1 (the compiled StaticCache stage above; off by default). With
it, the default per-architecture limit is 3 x 120 s (compiling runs g++ for
seconds per graph; HF_SWEEP_TIMEOUT_S or --timeout still set it exactly), the
workers get TORCHINDUCTOR_COMPILE_THREADS=1 (no compile worker pools inside the
capped children), the sweep compiles into a fresh temporary
TORCH_NEURONX_NEFF_CACHE_DIR (no graph comes from an earlier run's disk cache),
and the exit status is 1 on compile-fails as well as on neuron-fails.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.abspath(__file__)

# HF_SWEEP_COMPILE=1: the compiled StaticCache stage (module docstring); compiling takes seconds
# per graph, so the default time limit triples with it
COMPILE = os.environ.get("HF_SWEEP_COMPILE", "0") == "1"
TIMEOUT_S = int(os.environ.get("HF_SWEEP_TIMEOUT_S", str(120 * (3 if COMPILE else 1))))
MEMORY_LIMIT_GIB = float(os.environ.get("HF_SWEEP_MEMORY_LIMIT_GIB", "6"))
WORKERS = int(os.environ.get("HF_SWEEP_WORKERS", "2"))
MAX_NEW_TOKENS = 8
ATTN_IMPLEMENTATION = os.environ.get("HF_SWEEP_ATTN", "eager")
# The prompt is a batch of two rows: PROMPT, and a left-padded row (3 pad tokens, attention_mask 0).
PADDED = os.environ.get("HF_SWEEP_PADDED", "1") == "1"

# Environment variables that change the plugin's start-up; workers get none of
# them (the default emulated topology), as in tests/conftest.py.
PLUGIN_ENV_VARS = (
    "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_PLATFORM",
    "TORCH_NEURONX_CHIPS", "TORCH_NEURONX_DISABLE_CPU_FALLBACK", "TORCH_DEVICE_BACKEND_AUTOLOAD",
)

from hf_tiny_configs import OVERRIDES, PROMPT, _is_int, config_class, model_class, prompt_ids, shrunk_config  # noqa: E402
from hf_sweep_compare import ATOL, RTOL, SEED, _add_note, _first_tensor, _short, _tokens_differ, _where  # noqa: E402
from hf_sweep_compiled_stage import STATIC_COMPILED_STAGE, STATIC_EAGER_STAGE, compiled_static_stage  # noqa: E402

# ---------------------------------------------------------------------------
# One architecture (runs in the forked child)
# ---------------------------------------------------------------------------


def run_architecture(model_type: str, stage, cpu_only: bool = False) -> dict:
    """Builds, runs and compares one architecture. stage(name) reports progress."""
    import copy
    import warnings

    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)

    stage("config")
    unsupported = OVERRIDES.get(model_type, {}).get("@unsupported")
    if unsupported:
        raise NotImplementedError(f"not runnable standalone: {unsupported}")
    config = shrunk_config(model_type)
    stage("build")
    torch.manual_seed(SEED)
    def build(attn):
        torch.manual_seed(SEED)
        if OVERRIDES.get(model_type, {}).get("@config_class"):
            return model_class(model_type)._from_config(config, attn_implementation=attn, dtype=torch.float32)
        return AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=torch.float32)

    attn_note = None
    try:
        model = build(ATTN_IMPLEMENTATION)
    except ValueError as exc:
        if ATTN_IMPLEMENTATION == "eager" or "does not support" not in str(exc):
            raise
        attn_note = f"no {ATTN_IMPLEMENTATION} support: eager attention"
        model = build("eager")
    if model_type == "xmod":
        model.set_default_language(next(iter(model.config.languages)))
    model.eval()
    n_params = sum(p.numel() for p in model.parameters())
    input_ids = prompt_ids(model.config, model_type)
    attention_mask = torch.ones_like(input_ids)
    gen_kwargs = dict(do_sample=False, max_new_tokens=MAX_NEW_TOKENS, return_dict_in_generate=True,
                      output_logits=True)
    gen_config = getattr(model, "generation_config", None)
    if gen_config is not None and gen_config.pad_token_id is None:
        eos = gen_config.eos_token_id
        gen_kwargs["pad_token_id"] = (eos[0] if isinstance(eos, list) else eos) if eos is not None else 0
    if PADDED and input_ids.shape[0] == 1:
        # a second row, left-padded by 3 (exercises the padding masks)
        pad = gen_kwargs.get("pad_token_id", getattr(getattr(model, "generation_config", None), "pad_token_id", 0))
        pad = pad if _is_int(pad) else 0
        row = torch.cat([torch.full((3,), pad), input_ids[0, 3:].flip(0)])
        input_ids = torch.stack([input_ids[0], row])
        attention_mask = torch.ones_like(input_ids)
        attention_mask[1, :3] = 0

    # generate() is what is tested; where it is broken for an architecture in this transformers
    # release (on CPU), generate(use_cache=False) and then a plain greedy loop over forward() stand in
    modes = ["generate", "generate(use_cache=False)", "greedy loop"]
    chosen = {}

    def greedy_loop(m, ids, mask):
        seq, steps = ids, []
        for _ in range(MAX_NEW_TOKENS):
            logits = _first_tensor(m(input_ids=seq, attention_mask=mask, use_cache=False))[:, -1]
            steps.append(logits)
            seq = torch.cat([seq, logits.argmax(-1, keepdim=True).to(seq.dtype)], dim=-1)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
        return seq, steps

    def generate(m, ids, mask, mode):
        torch.manual_seed(SEED)
        if mode == "greedy loop":
            return greedy_loop(m, ids, mask)
        extra = {"use_cache": False} if mode == "generate(use_cache=False)" else {}
        out = m.generate(input_ids=ids, attention_mask=mask, **gen_kwargs, **extra)
        return out.sequences, list(out.logits or [])

    def run(m, device):
        ids, mask = input_ids.to(device), attention_mask.to(device)
        stage(f"{device}:forward")
        with torch.no_grad():
            torch.manual_seed(SEED)
            logits = _first_tensor(m(input_ids=ids, attention_mask=mask)).detach()
        if logits.device.type != device:
            raise RuntimeError(f"the forward pass returned logits on {logits.device}, not on {device}")
        logits = logits.to("cpu")
        stage(f"{device}:generate")
        with torch.no_grad():
            if "mode" in chosen:
                seq, steps = generate(m, ids, mask, chosen["mode"])
            else:
                errors = []
                for mode in modes:
                    try:
                        seq, steps = generate(m, ids, mask, mode)
                    except Exception as exc:  # noqa: BLE001
                        if mode == modes[-1]:
                            raise
                        errors.append(f"{mode}: {_short(exc)}")
                        continue
                    chosen["mode"] = mode
                    chosen["errors"] = errors
                    break
        return logits, seq.to("cpu"), [t.detach().to("cpu") for t in steps]

    # the neuron copy first (deepcopy of the untouched model, identical weights), then CPU runs
    neuron_model = None if cpu_only else copy.deepcopy(model)
    cpu_logits, cpu_seq, cpu_steps = run(model, "cpu")
    result = {"params": n_params, "cpu_tokens": cpu_seq[0, input_ids.shape[-1]:].tolist()}
    if attn_note:
        result["note"] = attn_note
    if chosen["mode"] != "generate":
        _add_note(result, f"generate() fails on CPU ({chosen['errors'][0][:200]}); compared with {chosen['mode']}")
    if cpu_only:
        return result
    if not torch.isfinite(cpu_logits).all():
        _add_note(result, "non-finite logits on CPU")
    stage("neuron:to")
    neuron_model = neuron_model.to("neuron")
    off = sorted({t.device.type for t in list(neuron_model.parameters()) + list(neuron_model.buffers())} - {"neuron"})
    if off:
        raise RuntimeError(f"model.to('neuron') left parameters/buffers on {off}")
    dev_logits, dev_seq, dev_steps = run(neuron_model, "neuron")
    stage("compare")
    result["neuron_tokens"] = dev_seq[0, input_ids.shape[-1]:].tolist()
    problems = []
    if dev_logits.shape != cpu_logits.shape or dev_logits.dtype != cpu_logits.dtype:
        problems.append(f"forward logits shape/dtype {tuple(dev_logits.shape)}/{dev_logits.dtype} vs CPU "
                        f"{tuple(cpu_logits.shape)}/{cpu_logits.dtype}")
    else:
        diff = (dev_logits.double() - cpu_logits.double()).abs()
        result["max_abs_diff"] = float(diff.nan_to_num(nan=float("inf")).max()) if diff.numel() else 0.0
        if not torch.allclose(dev_logits, cpu_logits, atol=ATOL, rtol=RTOL, equal_nan=True):
            problems.append(f"forward logits differ: max abs diff {result['max_abs_diff']:.3g} "
                            f"(max |cpu| {float(cpu_logits.abs().max()):.3g})")
    mismatch, ties = _tokens_differ(cpu_seq, cpu_steps, dev_seq, dev_steps, input_ids.shape[-1])
    if mismatch:
        problems.append(f"generated tokens differ: cpu {cpu_seq[:, input_ids.shape[-1]:].tolist()} vs neuron "
                        f"{dev_seq[:, input_ids.shape[-1]:].tolist()}")
    elif ties:
        _add_note(result, f"near-tie at {', '.join(ties)} (logits agree, top-2 gap within tolerance)")
    result["problems"] = problems
    if COMPILE and not problems:
        result.update(compiled_static_stage(neuron_model, input_ids, attention_mask, gen_kwargs, stage))
        if result.get("compile_note"):
            _add_note(result, result.pop("compile_note"))
    return result


# ---------------------------------------------------------------------------
# Worker: imports once, forks one child per architecture
# ---------------------------------------------------------------------------


def _child(model_type: str, wfd: int, cpu_only: bool) -> None:
    import resource

    os.dup2(2, 1)  # stdout is the worker's channel to the driver
    limit = int(MEMORY_LIMIT_GIB * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = os.fdopen(wfd, "w", buffering=1)

    def emit(**kw):
        out.write(json.dumps(kw) + "\n")
        out.flush()

    code = 0
    try:
        result = run_architecture(model_type, lambda s: emit(stage=s, t=time.time()), cpu_only=cpu_only)
        emit(result=result)
    except BaseException as exc:  # noqa: BLE001
        emit(error=_short(exc), where=_where(exc), trace=traceback.format_exc()[-4000:])
        code = 1
    try:
        out.flush()
    finally:
        os._exit(code)


def _kill_tree(pid: int) -> None:
    """SIGKILLs pid and its descendants: a child that timed out while compiling (HF_SWEEP_COMPILE)
    may have g++ running, which would otherwise go on competing for the cores. The descendants are
    found from /proc/*/stat before anything is killed (killed, they would be reparented)."""
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError, IndexError):
            continue
    tree, frontier = [pid], [pid]
    while frontier:
        frontier = [p for p, pp in parents.items() if pp in frontier]
        tree += frontier
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def _run_forked(model_type: str, timeout: float, cpu_only: bool) -> dict:
    rfd, wfd = os.pipe()
    t0 = time.time()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            _child(model_type, wfd, cpu_only)
        finally:
            os._exit(3)
    os.close(wfd)
    buf, messages, status = b"", [], None
    deadline = t0 + timeout
    timed_out = False
    while True:
        remaining = deadline - time.time()
        if remaining <= 0:
            timed_out = True
            break
        r, _, _ = select.select([rfd], [], [], min(remaining, 1.0))
        if r:
            chunk = os.read(rfd, 1 << 16)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                try:
                    messages.append(json.loads(line))
                except ValueError:
                    pass
    if timed_out:
        _kill_tree(pid)
    _, status = os.waitpid(pid, 0)
    os.close(rfd)
    seconds = time.time() - t0
    stages = [m for m in messages if "stage" in m]
    rec = {"model_type": model_type, "seconds": round(seconds, 2), "stage": stages[-1]["stage"] if stages else "start"}
    ends = [m["t"] for m in stages[1:]] + [t0 + seconds]
    rec["stage_seconds"] = {m["stage"]: round(end - m["t"], 2) for m, end in zip(stages, ends)}
    if stages:
        rec["stage_seconds"]["fork"] = round(stages[0]["t"] - t0, 2)
    final = next((m for m in messages if "result" in m or "error" in m), None)
    if timed_out:
        rec["error"] = f"timed out after {timeout:.0f} s"
    elif final is None:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        rec["error"] = (f"crashed ({signal.Signals(sig).name})" if sig else
                        f"exited with status {os.WEXITSTATUS(status)} without a result")
    elif "error" in final:
        rec["error"] = final["error"]
        rec["where"] = final.get("where", "")
        rec["trace"] = final.get("trace", "")
    else:
        rec.update(final["result"])
    rec["status"] = classify(rec)
    return rec


def classify(rec: dict) -> str:
    if "error" in rec:
        # a crash or time-out in the StaticCache stages (HF_SWEEP_COMPILE) comes after a neuron pass
        if rec["stage"] == STATIC_EAGER_STAGE:
            return "static-unsupported"
        if rec["stage"] == STATIC_COMPILED_STAGE:
            return "compile-fails"
        return "neuron-fails" if rec["stage"].startswith(("neuron", "compare")) else "cpu-fails"
    if rec.get("problems"):
        return "neuron-fails"
    if rec.get("static_unsupported"):
        return "static-unsupported"
    return "compile-fails" if rec.get("compile_problems") else "pass"


def serve(cpu_only: bool, timeout: float) -> None:
    """Worker loop: model types on stdin, one JSON record per line on stdout."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import torch  # noqa: F401  (imported once, inherited by the forked children)
    import transformers  # noqa: F401
    from transformers import AutoConfig, AutoModelForCausalLM  # noqa: F401
    import transformers.generation  # noqa: F401
    for name in ("transformers.modeling_utils", "transformers.modeling_layers", "transformers.generation.utils",
                 "transformers.masking_utils", "transformers.cache_utils", "transformers.modeling_rope_utils",
                 "transformers.processing_utils", "transformers.integrations.sdpa_attention"):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001
            pass

    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    out = sys.stdout
    out.write(json.dumps({"ready": True, "model_types": sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)}) + "\n")
    out.flush()
    for line in sys.stdin:
        model_type = line.strip()
        if not model_type:
            continue
        try:
            rec = _run_forked(model_type, timeout, cpu_only)
        except Exception as exc:  # noqa: BLE001
            rec = {"model_type": model_type, "stage": "worker", "error": f"worker: {_short(exc)}",
                   "status": "neuron-fails", "seconds": 0}
        out.write(json.dumps(rec) + "\n")
        out.flush()


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------


def _worker_env(cpu_only: bool, compile_cache: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if cpu_only or k not in PLUGIN_ENV_VARS}
    if COMPILE:
        # Inductor compiles in the capped child itself rather than in a pool of worker processes
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    if compile_cache:
        env["TORCH_NEURONX_NEFF_CACHE_DIR"] = compile_cache
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["PYTHONWARNINGS"] = "ignore"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


class _Worker:
    """A --serve process: imports torch and transformers once, then forks one child per architecture."""

    def __init__(self, cpu_only: bool, timeout: float, compile_cache: str | None = None):
        args = [sys.executable, HERE, "--serve", "--timeout", str(timeout)] + (["--cpu-only"] if cpu_only else [])
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1, env=_worker_env(cpu_only, compile_cache))
        self.model_types = None

    def wait_ready(self) -> list[str]:
        line = self.proc.stdout.readline()
        msg = json.loads(line) if line.startswith("{") else {}
        if not msg.get("ready"):
            self.proc.wait()
            self.log.seek(0)
            tail = self.log.read()[-3000:]
            raise RuntimeError(f"sweep worker failed to start (rc={self.proc.returncode}):\n{tail}")
        self.model_types = msg["model_types"]
        return self.model_types

    def run(self, model_type: str) -> dict | None:
        try:
            self.proc.stdin.write(model_type + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            return None
        # the children's output goes to the log file; keep it from growing without bound
        self.log.seek(0)
        self.log.truncate()
        return json.loads(line) if line else None

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def run_sweep(pattern: str | None = None, workers: int = WORKERS, timeout: float = TIMEOUT_S,
              cpu_only: bool = False, log=None) -> tuple[list[dict], float]:
    """Runs the sweep over the model types matching pattern; returns (records, seconds)."""
    if not COMPILE or cpu_only:
        return _run_workers(pattern, workers, timeout, cpu_only, log, None)
    # a fresh compile cache for this run, shared by its workers, so that no result depends on
    # graphs an earlier run left in the disk cache
    with tempfile.TemporaryDirectory(prefix="hf-sweep-neff-") as compile_cache:
        return _run_workers(pattern, workers, timeout, cpu_only, log, compile_cache)


def _run_workers(pattern, workers, timeout, cpu_only, log, compile_cache) -> tuple[list[dict], float]:
    t0 = time.time()
    pool = [_Worker(cpu_only, timeout, compile_cache) for _ in range(max(1, workers))]  # they start concurrently
    try:
        names = pool[0].wait_ready()
        for w in pool[1:]:
            w.wait_ready()
    except BaseException:
        for w in pool:
            if w.proc.poll() is None:
                w.proc.kill()
            w.close()
        raise
    if pattern:
        rx = re.compile(pattern)
        names = [n for n in names if rx.search(n)]
    for w in pool[max(1, len(names)):]:
        w.close()
    pool = pool[:max(1, len(names))]
    queue = list(names)
    lock = threading.Lock()
    records: dict[str, dict] = {}

    def loop(worker):
        while True:
            with lock:
                if not queue:
                    break
                name = queue.pop(0)
            rec = worker.run(name) if worker is not None else None
            if rec is None:
                # the worker itself died (never the architecture's own process): counted against
                # the architecture so that it is seen, and a fresh worker takes over
                rec = {"model_type": name, "stage": "worker", "error": "sweep worker died", "status": "neuron-fails",
                       "seconds": 0}
                if worker is not None:
                    worker.close()
                try:
                    worker = _Worker(cpu_only, timeout, compile_cache)
                    worker.wait_ready()
                except Exception:  # noqa: BLE001
                    worker = None
            with lock:
                records[name] = rec
                if log:
                    log(_progress_line(rec, len(records), len(names)))
        if worker is not None:
            worker.close()

    threads = [threading.Thread(target=loop, args=(w,), daemon=True) for w in pool]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [records[n] for n in names], time.time() - t0


def _reason(rec: dict) -> str:
    if "error" in rec:
        where = f" [{rec['where']}]" if rec.get("where") else ""
        return f"{rec['stage']}: {rec['error']}{where}"
    if rec.get("static_unsupported"):
        return f"static cache: {rec['static_unsupported']}"
    if rec.get("compile_problems"):
        where = f" [{rec['compile_where']}]" if rec.get("compile_where") else ""
        dynamo = f" (Dynamo's eager backend: {rec['dynamo_eager']})" if rec.get("dynamo_eager") else ""
        return "; ".join(rec["compile_problems"]) + where + dynamo
    return "; ".join(rec.get("problems", [])) or rec.get("note", "")


def _progress_line(rec, done, total):
    return f"[{done}/{total}] {rec['model_type']:<28} {rec['status']:<13} {rec['seconds']:6.1f}s  {_reason(rec)[:160]}"


COMPILE_CLASSES = ("compile-fails", "static-unsupported")


def summarise(records):
    by = {"pass": [], "cpu-fails": [], "neuron-fails": []}
    if COMPILE or any(r["status"] in COMPILE_CLASSES for r in records):
        by.update({c: [] for c in COMPILE_CLASSES})
    for r in records:
        by[r["status"]].append(r)
    return by


def format_report(records: list[dict], seconds: float, verbose: bool = False) -> str:
    by = summarise(records)
    on_cpu = len(records) - len(by["cpu-fails"])
    lines = [f"HF causal-LM architecture sweep: {len(records)} architectures in {seconds:.0f} s "
             f"(fp32, {ATTN_IMPLEMENTATION} attention, atol={ATOL:g} rtol={RTOL:g}, {MAX_NEW_TOKENS} greedy tokens)"]
    lines.append(f"  pass: {len(by['pass'])}   cpu-fails (not counted): {len(by['cpu-fails'])}   "
                 f"neuron-only failures: {len(by['neuron-fails'])}   (of {on_cpu} that work on CPU)")
    if "compile-fails" in by:
        lines.append(f"  compiled StaticCache (of the {on_cpu - len(by['neuron-fails'])} that pass on neuron): "
                     f"compile-fails: {len(by['compile-fails'])}   "
                     f"static-unsupported: {len(by['static-unsupported'])}")
    sections = [("neuron-fails", "neuron-only failures (work on CPU, fail on neuron):"),
                ("compile-fails", "compile-fails (pass on neuron; the compiled StaticCache generate raises, "
                                  "crashes or differs from the eager one):")]
    for cls, title in sections:
        if by.get(cls):
            lines.append("\n" + title)
            for r in by[cls]:
                lines.append(f"  {r['model_type']:<28} {_reason(r)}")
                trace = r.get("trace") or r.get("compile_trace")
                if verbose and trace:
                    lines.extend("      " + x for x in trace.rstrip().splitlines()[-12:])
    if by.get("static-unsupported"):
        lines.append("\nstatic-unsupported (pass on neuron; eager StaticCache generate fails, nothing compiled):")
        for r in by["static-unsupported"]:
            lines.append(f"  {r['model_type']:<28} {_reason(r)[:300]}")
    if by["cpu-fails"]:
        lines.append("\nfail on CPU too (the tiny config does not run; no verdict on neuron):")
        for r in by["cpu-fails"]:
            lines.append(f"  {r['model_type']:<28} {_reason(r)[:300]}")
    notes = [r for r in by["pass"] if r.get("note")]
    if notes:
        lines.append("\npassed with a note:")
        for r in notes:
            lines.append(f"  {r['model_type']:<28} {r['note']}")
    lines.append("\npass: " + ", ".join(r["model_type"] for r in by["pass"]))
    slow = sorted(records, key=lambda r: -r["seconds"])[:5]
    lines.append("slowest: " + ", ".join(f"{r['model_type']} {r['seconds']:.0f}s" for r in slow))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pattern", nargs="?", default=None, help="regex over model types (re.search)")
    ap.add_argument("--workers", type=int, default=WORKERS)
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S)
    ap.add_argument("--cpu-only", action="store_true", help="build and run on CPU only (for tuning the configs)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--show-config", metavar="MODEL_TYPE", help="print the tiny config of MODEL_TYPE and exit")
    ap.add_argument("--json", metavar="PATH", help="also write the records as JSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="tracebacks in the report")
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.cpu_only, args.timeout)
        return 0
    if args.show_config:
        print(shrunk_config(args.show_config))
        return 0
    records, seconds = run_sweep(args.pattern, args.workers, args.timeout, args.cpu_only,
                                 log=lambda m: print(m, file=sys.stderr, flush=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    print(format_report(records, seconds, args.verbose))
    by = summarise(records)
    return 1 if by["neuron-fails"] or by.get("compile-fails") else 0


if __name__ == "__main__":
    sys.exit(main())

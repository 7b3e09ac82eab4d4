"""GPT-2-small construction in a fresh process: the rise of peak resident memory while
``GPT(config, seed)`` runs, the bytes the model holds and its ``state_dict`` carries, and the
seconds it took (one thread). Run it with ``PYTHONPATH`` pointing at the package to measure:

    PYTHONPATH=python python python/bench/construct.py orthogonal
"""

import json
import resource
import sys
import time

import torch

from orthoformer import GPTConfig
from orthoformer.torch import GPT

torch.set_num_threads(1)
cfg = GPTConfig.preset("gpt2-small", attention=sys.argv[1] if len(sys.argv) > 1 else "softmax")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t = time.perf_counter()
model = GPT(cfg, seed=0)
secs = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
held = sum(p.numel() * p.element_size() for p in model.parameters())
held += sum(b.numel() * b.element_size() for b in model.buffers())
carried = sum(v.numel() * v.element_size() for v in model.state_dict().values())
mib = 2**20
print(
    json.dumps(
        {
            "attention": cfg.attention,
            "peak_rise_MiB": round((peak - base) / mib),
            "model_MiB": round(held / mib),
            "state_dict_MiB": round(carried / mib),
            "seconds": round(secs, 2),
        }
    )
)

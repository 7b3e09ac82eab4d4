"""Writes an `orthoformer train`/`compare` checkpoint of a bias-free softmax GPT as a nanoGPT
`ckpt.pt` (model.py's names: c_attn = [W_Q; W_K; W_V], c_proj, c_fc, lm_head tied to wte), so
nanoGPT's own model can score our weights (docs/RESULTS.md: the recipe is nanoGPT's
function).

Usage: python3 scripts/orthoformer_to_nanogpt.py CHECKPOINT_DIR OUT.pt
"""
import json
import sys

import torch
from safetensors.torch import load_file

src, dst = sys.argv[1], sys.argv[2]
sd = load_file(src + "/model.safetensors")
m = json.load(open(src + "/state.json"))["model"]
if m["attention"] != "softmax" or m["attn_bias"] or m["ffn_bias"] or m["norm_bias"]:
    sys.exit("only a softmax model without biases maps onto nanoGPT's bias=False GPT")
if m.get("gelu") != "erf":
    print("warning: this model's GELU is the tanh form; nanoGPT's is exact", file=sys.stderr)
out = {
    "transformer.wte.weight": sd["wte"],
    "transformer.wpe.weight": sd["wpe"],
    "transformer.ln_f.weight": sd["ln_f.weight"],
    "lm_head.weight": sd["wte"],
}
for l in range(m["n_layer"]):
    p, q = f"h.{l}.", f"transformer.h.{l}."
    out[q + "ln_1.weight"] = sd[p + "ln1.weight"]
    out[q + "ln_2.weight"] = sd[p + "ln2.weight"]
    out[q + "attn.c_attn.weight"] = torch.cat(
        [sd[p + "attn.q.weight"], sd[p + "attn.k.weight"], sd[p + "attn.v.weight"]], 0
    )
    out[q + "attn.c_proj.weight"] = sd[p + "attn.o.weight"]
    out[q + "mlp.c_fc.weight"] = sd[p + "mlp.fc.weight"]
    out[q + "mlp.c_proj.weight"] = sd[p + "mlp.proj.weight"]
args = dict(n_layer=m["n_layer"], n_head=m["n_head"], n_embd=m["d_model"],
            block_size=m["context"], bias=False, vocab_size=m["vocab_size"], dropout=0.0)
torch.save({"model": out, "model_args": args, "iter_num": -1, "best_val_loss": float("nan")}, dst)

"""Baseline: one training step of a small GPT (pre-LN, causal MHA, GELU FFN, tied head, AdamW) in PyTorch eager on CPU.
Usage: python torch_gpt_bench.py --layers 4 --d 128 --heads 4 --block 128 --batch 16 --vocab 65 [--frozen-qk] [--steps 20] [--fwd-bwd-only]
--fwd-bwd-only times forward + backward (zero_grad, loss, backward) without the AdamW step,
which is what Orthoformer's model benchmark times.
Prints: median ms/step, tokens/s, trainable params."""
import argparse, time, math, statistics, resource
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument('--layers', type=int, default=4); p.add_argument('--d', type=int, default=128)
p.add_argument('--heads', type=int, default=4); p.add_argument('--block', type=int, default=128)
p.add_argument('--batch', type=int, default=16); p.add_argument('--vocab', type=int, default=65)
p.add_argument('--frozen-qk', action='store_true'); p.add_argument('--steps', type=int, default=20)
p.add_argument('--threads', type=int, default=2); p.add_argument('--compile', action='store_true')
p.add_argument('--fwd-bwd-only', action='store_true')
a = p.parse_args()
torch.set_num_threads(a.threads); torch.manual_seed(0)

class Attn(nn.Module):
    def __init__(s, d, h, frozen):
        super().__init__(); s.h = h
        s.q = nn.Linear(d, d, bias=False); s.k = nn.Linear(d, d, bias=False)
        s.v = nn.Linear(d, d, bias=False); s.o = nn.Linear(d, d, bias=False)
        if frozen:
            for w in (s.q.weight, s.k.weight):
                nn.init.orthogonal_(w); w.requires_grad_(False)
    def forward(s, x):
        B, T, C = x.shape; hd = C // s.h
        q = s.q(x).view(B, T, s.h, hd).transpose(1, 2)
        k = s.k(x).view(B, T, s.h, hd).transpose(1, 2)
        v = s.v(x).view(B, T, s.h, hd).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return s.o(y.transpose(1, 2).reshape(B, T, C))

class Block(nn.Module):
    def __init__(s, d, h, frozen):
        super().__init__(); s.ln1 = nn.LayerNorm(d); s.att = Attn(d, h, frozen); s.ln2 = nn.LayerNorm(d)
        s.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(s, x):
        x = x + s.att(s.ln1(x)); return x + s.ff(s.ln2(x))

class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.tok = nn.Embedding(a.vocab, a.d); s.pos = nn.Embedding(a.block, a.d)
        s.blocks = nn.ModuleList([Block(a.d, a.heads, a.frozen_qk) for _ in range(a.layers)])
        s.ln = nn.LayerNorm(a.d); s.head = nn.Linear(a.d, a.vocab, bias=False); s.head.weight = s.tok.weight
    def forward(s, idx, tgt):
        T = idx.shape[1]
        x = s.tok(idx) + s.pos(torch.arange(T))
        for b in s.blocks: x = b(x)
        logits = s.head(s.ln(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))

m = GPT()
if a.compile: m = torch.compile(m)
opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-3)
x = torch.randint(0, a.vocab, (a.batch, a.block)); y = torch.randint(0, a.vocab, (a.batch, a.block))
times = []
for i in range(a.steps + 3):
    t0 = time.perf_counter()
    loss = m(x, y); opt.zero_grad(set_to_none=True); loss.backward()
    if not a.fwd_bwd_only: opt.step()
    dt = time.perf_counter() - t0
    if i >= 3: times.append(dt)
med = statistics.median(times)
n_train = sum(p.numel() for p in m.parameters() if p.requires_grad)
print(f"torch {torch.__version__} frozen_qk={a.frozen_qk} median_ms={med*1e3:.2f} tokens_per_s={a.batch*a.block/med:.0f} trainable={n_train} peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} loss={loss.item():.3f}")

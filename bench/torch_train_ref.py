# bench/torch_train_ref.py — the PyTorch side of a training-speed comparison with bench/memory.lua:
# an all-MiniLM-L6-v2-shaped BertModel (random init), 32 x 128 tokens a step, AdamW, fp32 then
# bf16 autocast; prints tokens/s and the peak RSS. Needs torch and transformers (not the build).
#   python3 bench/torch_train_ref.py
import time, torch, sys
from transformers import BertConfig, BertModel
torch.manual_seed(0)
cfg = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = BertModel(cfg); m.train()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
B, T = 32, 128
ids = torch.randint(0, 30522, (B, T)); mask = torch.ones(B, T, dtype=torch.long)
def step(bf16=False):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        h = m(input_ids=ids, attention_mask=mask).last_hidden_state
        loss = h.float().mean(1).pow(2).sum()
    loss.backward(); opt.step()
for mode in [False, True]:
    step(mode)
    t = time.time(); n = 3
    for _ in range(n): step(mode)
    dt = (time.time() - t) / n
    print(("bf16" if mode else "fp32"), f"{B*T/dt:.0f} tok/s, {dt:.2f} s/step, threads {torch.get_num_threads()}")
import resource; print("peak RSS MiB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024)

#!/usr/bin/env python3
"""Writes the PyTorch golden files the model-parity tests compare against (reference side; never run by tests).

  tests/data/golden_tiny_bert.safetensors      tiny_bert: 4 texts, hidden states, mean-pooled embedding,
                                               loss = sum(embedding * loss_weight), grad.<name> of every parameter
  tests/data/golden_tiny_bert_cls.safetensors  tiny_bert_cls: 3 sentence pairs, logits, labels,
                                               mean cross-entropy, grad.<name> of every parameter
  tests/data/golden_minilm.safetensors         all-MiniLM-L6-v2: 8 texts (max 128 tokens), normalised
                                               embedding, loss = sum(embedding * loss_weight),
                                               grad_norm.<name> and grad_slice.<name> (first 64 elements)

Invariants: everything is float32 on the CPU, model.eval() (no dropout) with autograd on, eager attention
(the textbook softmax(QK^T/sqrt(d) + mask)V; the additive mask is float32's lowest value, so padded keys get
exactly zero weight). Float tensors are F32; token ids, masks and labels are I64. A parameter that gets no
gradient from the loss (the pooler under mean pooling) has an all-zero gradient written. Each golden is also
recomputed in float64 and the float32-vs-float64 error printed, so a test's tolerance can be judged against
the reference's own rounding error. The texts are written next to the goldens, one per line (pairs: TSV).

Usage: /tmp/refvenv/bin/python tests/ref/make_golden.py [--skip-minilm]
  (run tests/ref/make_tiny_bert.py first, and scripts/fetch_minilm.sh for the MiniLM golden)
"""
import copy
import os
import sys

import tokenizers
import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from transformers import AutoTokenizer, BertForSequenceClassification, BertModel

sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from tiny_golden import CLS_LABELS, CLS_PAIRS, DATA, ROOT, TINY_TEXTS  # noqa: E402  (this folder is on sys.path)

MINILM = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")

SEED_LOSS_WEIGHT_TINY = 42
SEED_LOSS_WEIGHT_MINILM = 43
MINILM_MAX_LEN = 128
SLICE = 64

MINILM_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Jag tycker om att läsa böcker på söndagar i sommarstugan.",
    "Hun spiste rødgrød med fløde i går aftes, og det smagte dejligt.",
    "Die Bürger müssen die Straße überqueren, bevor es dunkel wird.",
    "Café crème, naïve façade, résumé and piñata: accents everywhere, ÅÄÖ åäö ÆØÅ æøå.",
    "I love pizza 🍕 and sunshine ☀️ on a lazy Sunday 😀!",
    "Sentence embeddings map text to vectors.",
    # Over 128 tokens: truncated at 128 (the last token is [SEP]).
    "Long documents are a common source of subtle bugs in embedding pipelines, because the tokenizer "
    "silently truncates them, the position embeddings run out, and the attention mask has to be right "
    "for every padded and every real position at once; this sentence keeps going on purpose, listing "
    "tokenization, normalization, accents such as é, ü and ø, numbers like 1234567 and 3.14159, "
    "hyphenated-words, apostrophes in it's and don't, parentheses (like these), and a few rare words "
    "such as antidisestablishmentarianism, floccinaucinihilipilification and pneumonoultramicroscopic "
    "silicovolcanoconiosis, until it is certainly longer than one hundred and twenty-eight word pieces, "
    "which is the limit used for the golden file, and then it still goes on a little further.",
]


# ------------------------------------------------------------ helpers
def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            assert "\n" not in line and "\t" not in line
            f.write(line + "\n")


def grads_of(model):
    """name -> gradient (float32, contiguous); zeros where the loss does not reach a parameter."""
    out = {}
    for name, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        out[name] = g.detach().to(torch.float32).contiguous()
    return out


def rel_err(a, b):
    a, b = a.double(), b.double()
    denom = b.norm().item()
    return (a - b).norm().item() / denom if denom > 0 else (a - b).norm().item()


def report(title, tensors, ref64=None):
    """Prints max |x| of every tensor and, when float64 references are given, the float32 error."""
    print(f"== {title}")
    for k, v in tensors.items():
        line = f"  {k:60s} {str(list(v.shape)):14s} {v.dtype}  max|x| {v.abs().max().item():.6g}"
        if ref64 is not None and k in ref64 and v.dtype == torch.float32:
            d = (v.double() - ref64[k]).abs().max().item()
            line += f"  f32-vs-f64 maxabs {d:.3g} rel {rel_err(v, ref64[k]):.3g}"
        print(line)


def save(path, tensors, meta):
    """meta documents the file here in the script; it is not written."""
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    for k, v in tensors.items():
        assert v.dtype in (torch.float32, torch.int64), (k, v.dtype)
    # Only {"format": "pt"} in the header: the safetensors writer orders metadata keys at random, and
    # a regenerated file should be byte-identical. Provenance lives in tests/ref/README.md.
    save_file(tensors, path, metadata={"format": "pt"})
    print(f"wrote {os.path.relpath(path, ROOT)}: {os.path.getsize(path)} bytes")


def mean_pool(last, mask):
    """sentence-transformers' Pooling(mean): sum over real tokens / max(count, 1e-9)."""
    m = mask.unsqueeze(-1).to(last.dtype)
    return (last * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)


def check_tokenizer(folder, tok, enc, texts, pairs=None):
    """The tokenizer.json alone (tokenizers library) must give the ids transformers gave."""
    # all-MiniLM-L6-v2's tokenizer.json itself says truncation 128 (LongestFirst) and padding Fixed 128;
    # transformers ignores both and pads to the longest. Padding off here; its truncation equals ours.
    raw = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    raw.no_padding()
    for i in range(len(texts)):
        e = raw.encode(texts[i], pairs[i]) if pairs else raw.encode(texts[i])
        n = int(enc["attention_mask"][i].sum())
        ids = enc["input_ids"][i][:n].tolist()
        assert e.ids == ids, (texts[i], e.ids, ids)
        if pairs:
            assert e.type_ids == enc["token_type_ids"][i][:n].tolist()


# ------------------------------------------------------------ a) tiny_bert: embedding loss
def tiny_embedding_loss(model, enc, lw):
    out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                token_type_ids=enc["token_type_ids"])
    last = out.last_hidden_state
    emb = mean_pool(last, enc["attention_mask"])
    loss = (emb * lw).sum()
    loss.backward()
    return {"last_hidden_state": last.detach(), "embedding": emb.detach(),
            "embedding_norm": F.normalize(emb.detach(), p=2, dim=1), "loss": loss.detach().reshape(1)}


def golden_tiny_bert():
    folder = os.path.join(DATA, "tiny_bert")
    tok = AutoTokenizer.from_pretrained(folder)
    enc = tok(TINY_TEXTS, padding="longest", return_tensors="pt")
    check_tokenizer(folder, tok, enc, TINY_TEXTS)
    for i, t in enumerate(TINY_TEXTS):
        print(f"  tiny text {i}: {tok.convert_ids_to_tokens(enc['input_ids'][i])}")
    lw = torch.randn(len(TINY_TEXTS), 32, generator=torch.Generator().manual_seed(SEED_LOSS_WEIGHT_TINY))

    model = BertModel.from_pretrained(folder, attn_implementation="eager", torch_dtype=torch.float32).eval()
    model64 = copy.deepcopy(model).double()
    res = tiny_embedding_loss(model, enc, lw)
    res64 = tiny_embedding_loss(model64, enc, lw.double())

    t = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
         "token_type_ids": enc["token_type_ids"], **res, "loss_weight": lw}
    ref = dict(res64)
    for name, g in grads_of(model).items():
        t["grad." + name] = g
    for name, p in model64.named_parameters():
        ref["grad." + name] = p.grad if p.grad is not None else torch.zeros_like(p)
    check_against_sentence_transformers(folder, res["embedding"], TINY_TEXTS, 64)
    report("golden_tiny_bert", t, ref)
    write_lines(os.path.join(DATA, "golden_tiny_bert_texts.txt"), TINY_TEXTS)
    save(os.path.join(DATA, "golden_tiny_bert.safetensors"), t,
         {"model": "tests/data/tiny_bert", "texts": "tests/data/golden_tiny_bert_texts.txt",
          "loss": "sum(embedding * loss_weight); embedding = mean pooling of last_hidden_state over attention_mask"})


# ------------------------------------------------------------ b) tiny_bert_cls: cross-entropy
def cls_loss(model, enc, labels):
    out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                token_type_ids=enc["token_type_ids"], labels=labels)
    out.loss.backward()
    return {"logits": out.logits.detach(), "loss": out.loss.detach().reshape(1)}


def golden_tiny_bert_cls():
    folder = os.path.join(DATA, "tiny_bert_cls")
    tok = AutoTokenizer.from_pretrained(folder)
    a, b = [p[0] for p in CLS_PAIRS], [p[1] for p in CLS_PAIRS]
    enc = tok(a, b, padding="longest", return_tensors="pt")
    check_tokenizer(folder, tok, enc, a, b)
    labels = torch.tensor(CLS_LABELS, dtype=torch.int64)

    model = BertForSequenceClassification.from_pretrained(
        folder, attn_implementation="eager", torch_dtype=torch.float32).eval()
    model64 = copy.deepcopy(model).double()
    res = cls_loss(model, enc, labels)
    res64 = cls_loss(model64, enc, labels)
    # The cross-check the Lua side will do: mean cross-entropy of the logits.
    assert abs(F.cross_entropy(res["logits"], labels).item() - res["loss"].item()) < 1e-6

    t = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
         "token_type_ids": enc["token_type_ids"], "labels": labels, **res}
    ref = dict(res64)
    for name, g in grads_of(model).items():
        t["grad." + name] = g
    for name, p in model64.named_parameters():
        ref["grad." + name] = p.grad
    report("golden_tiny_bert_cls", t, ref)
    with open(os.path.join(DATA, "golden_tiny_bert_cls_pairs.tsv"), "w", encoding="utf-8") as f:
        for x, y in CLS_PAIRS:
            f.write(f"{x}\t{y}\n")
    save(os.path.join(DATA, "golden_tiny_bert_cls.safetensors"), t,
         {"model": "tests/data/tiny_bert_cls", "pairs": "tests/data/golden_tiny_bert_cls_pairs.tsv",
          "loss": "mean cross-entropy of logits against labels"})


# ------------------------------------------------------------ c) all-MiniLM-L6-v2
def minilm_loss(model, enc, lw):
    out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                token_type_ids=enc["token_type_ids"])
    emb = F.normalize(mean_pool(out.last_hidden_state, enc["attention_mask"]), p=2, dim=1)
    loss = (emb * lw).sum()
    loss.backward()
    return emb.detach(), loss.detach().reshape(1)


def check_against_sentence_transformers(folder, emb, texts, max_len):
    """sentence-transformers' own encode() (its default attention kernel) must agree within 1e-5."""
    try:
        import sentence_transformers
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print("  sentence-transformers not installed: embedding checked with transformers + pooling config only")
        return
    st = SentenceTransformer(folder, device="cpu")
    st.max_seq_length = max_len
    e = st.encode(texts, batch_size=len(texts), convert_to_tensor=True)
    d = (e - emb).abs().max().item()
    cos = F.cosine_similarity(e.double(), emb.double(), dim=1).min().item()
    print(f"  vs sentence-transformers {sentence_transformers.__version__}: max abs diff {d:.3g}, min cosine {cos:.9f}")
    assert d < 1e-5, "embedding disagrees with sentence-transformers"


def golden_minilm():
    if not os.path.isfile(os.path.join(MINILM, "model.safetensors")):
        sys.exit(f"{MINILM} is missing: run scripts/fetch_minilm.sh first (or pass --skip-minilm)")
    tok = AutoTokenizer.from_pretrained(MINILM)
    full = tok(MINILM_TEXTS)["input_ids"]
    assert len(full[-1]) > MINILM_MAX_LEN, f"long text has only {len(full[-1])} tokens"
    print(f"  minilm token counts before truncation: {[len(x) for x in full]}")
    enc = tok(MINILM_TEXTS, padding="longest", truncation=True, max_length=MINILM_MAX_LEN, return_tensors="pt")
    check_tokenizer(MINILM, tok, enc, MINILM_TEXTS)
    assert enc["input_ids"].shape[1] == MINILM_MAX_LEN
    assert enc["token_type_ids"].abs().sum().item() == 0
    for i, t in enumerate(MINILM_TEXTS[:-1]):
        print(f"  minilm text {i}: {tok.convert_ids_to_tokens(enc['input_ids'][i][:int(enc['attention_mask'][i].sum())])}")
    lw = torch.randn(len(MINILM_TEXTS), 384, generator=torch.Generator().manual_seed(SEED_LOSS_WEIGHT_MINILM))

    model = BertModel.from_pretrained(MINILM, attn_implementation="eager", torch_dtype=torch.float32).eval()
    model64 = copy.deepcopy(model).double()
    emb, loss = minilm_loss(model, enc, lw)
    emb64, loss64 = minilm_loss(model64, enc, lw.double())
    check_against_sentence_transformers(MINILM, emb, MINILM_TEXTS, MINILM_MAX_LEN)

    t = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
         "token_type_ids": enc["token_type_ids"], "embedding": emb, "loss_weight": lw, "loss": loss}
    ref = {"embedding": emb64, "loss": loss64}
    g64 = {n: (p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in model64.named_parameters()}
    worst = (0.0, "")
    grads = grads_of(model)
    for name, g in grads.items():
        t["grad_norm." + name] = g.double().norm().to(torch.float32).reshape(1)
        t["grad_slice." + name] = g.flatten()[:SLICE].clone()
        ref["grad_norm." + name] = g64[name].norm().reshape(1)
        ref["grad_slice." + name] = g64[name].flatten()[:SLICE]
        if not name.endswith("attention.self.key.bias"):  # exactly zero in exact arithmetic: noise
            worst = max(worst, (rel_err(g, g64[name]), name))
    # The first 64 elements of the word-embedding gradient are the [PAD] row: all zero. So also keep the
    # first 64 columns of the rows of every token id the batch uses (sorted, [PAD] excluded).
    word = "embeddings.word_embeddings.weight"
    ids = torch.unique(enc["input_ids"][enc["attention_mask"].bool()])
    t["grad_rows_ids." + word] = ids
    t["grad_rows." + word] = grads[word][ids, :SLICE].contiguous()
    ref["grad_rows." + word] = g64[word][ids, :SLICE]
    report("golden_minilm", t, ref)
    print(f"  worst full-gradient f32-vs-f64 relative error (key biases excluded): {worst[0]:.3g} ({worst[1]})")
    write_lines(os.path.join(DATA, "golden_minilm_texts.txt"), MINILM_TEXTS)
    path = os.path.join(DATA, "golden_minilm.safetensors")
    save(path, t, {"model": "models/all-MiniLM-L6-v2 (scripts/fetch_minilm.sh)",
                   "texts": "tests/data/golden_minilm_texts.txt",
                   "max_length": str(MINILM_MAX_LEN),
                   "loss": "sum(embedding * loss_weight); embedding = L2-normalised mean pooling"})
    assert os.path.getsize(path) < 1_000_000


def main():
    torch.set_num_threads(1)  # fixed reduction order: regenerating gives the same bits on one machine
    torch.manual_seed(0)
    os.makedirs(DATA, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}")
    golden_tiny_bert()
    golden_tiny_bert_cls()
    if "--skip-minilm" not in sys.argv[1:]:
        golden_minilm()


if __name__ == "__main__":
    main()

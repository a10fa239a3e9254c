# bench/st_compare.py: the sentence-transformers side of bench/vs_pytorch.sh's real-data
# rows (needs the bench venv: bench/vs_pytorch.sh --setup; never the build or the tests).
#
#   python bench/st_compare.py finetune MODEL_DIR TRAIN.jsonl.gz STEPS
#       the demo recipe's job (recipes/minilm_sts_lora.lua) in SentenceTransformerTrainer:
#       LoRA r 8 / alpha 16 / dropout 0.1 on query and value (model.add_adapter, or peft's
#       get_peft_model on the inner transformer where add_adapter refuses the peft version), CoSENTLoss
#       scale 20, batch 16, AdamW lr 5e-4 weight decay 0.01, linear schedule with 10 %
#       warm-up, max_length 64, STEPS steps, no evaluation, no saving.
#       Prints "samples_s=N" over steps 2..STEPS (the first step, with its one-off costs, is
#       left out, as bench/vs_pytorch.sh does on the trainer side).
#   python bench/st_compare.py encode MODEL_DIR TEXTS.txt
#       model.encode(batch_size=32) of one text a line, model load excluded.
#       Prints "sentences_s=N".
import gzip
import json
import os
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_DISABLED", "true")

import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count()))


def finetune(model_dir, train_path, steps):
    from datasets import Dataset
    from peft import LoraConfig
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.losses import CoSENTLoss
    from transformers import TrainerCallback

    rows = [json.loads(line) for line in gzip.open(train_path, "rt", encoding="utf-8")]
    ds = Dataset.from_dict({"sentence1": [r["sentence1"] for r in rows], "sentence2": [r["sentence2"] for r in rows],
                            "score": [r["score"] / 5.0 for r in rows]})
    model = SentenceTransformer(model_dir, device="cpu")
    model.max_seq_length = 64
    lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1, target_modules=["query", "value"])
    try:
        model.add_adapter(lora)
    except ValueError:
        # transformers' own PEFT integration (behind add_adapter) may want a newer peft than
        # PyPI has; wrapping the inner transformer with peft itself trains the same adapters
        from peft import get_peft_model
        model[0].auto_model = get_peft_model(model[0].auto_model, lora)

    class Clock(TrainerCallback):
        ends = []

        def on_step_end(self, args, state, control, **kw):
            Clock.ends.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as out:
        args = SentenceTransformerTrainingArguments(
            output_dir=out, max_steps=steps, per_device_train_batch_size=16, learning_rate=5e-4, weight_decay=0.01,
            lr_scheduler_type="linear", warmup_steps=0.1, eval_strategy="no", save_strategy="no",
            logging_strategy="no", report_to=[], use_cpu=True, dataloader_num_workers=0, seed=1,
            disable_tqdm=True)
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=CoSENTLoss(model, scale=20.0),
                                             callbacks=[Clock()])
        trainer.train()
    e = Clock.ends
    print(f"samples_s={16 * (len(e) - 1) / (e[-1] - e[0]):.1f}")


def encode(model_dir, texts_path):
    texts = open(texts_path, encoding="utf-8").read().split("\n")
    texts = [t for t in texts if t]
    model = SentenceTransformer(model_dir, device="cpu")
    model.encode(texts[:32], batch_size=32)   # warm-up, untimed: the same one bench/encode_throughput.lua does
    t0 = time.perf_counter()
    model.encode(texts, batch_size=32)
    print(f"sentences_s={len(texts) / (time.perf_counter() - t0):.1f}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "finetune":
        finetune(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "encode":
        encode(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: st_compare.py finetune MODEL_DIR TRAIN.jsonl.gz STEPS | encode MODEL_DIR TEXTS.txt")

-- recipes/reranker_swenli.lua — a cross-encoder (reranker): a one-logit head on a BERT encoder,
-- trained with bce on SweNLI pairs (premise, hypothesis): an entailed hypothesis is relevant
-- (1), a neutral or contradicting one is not (0). Evaluated by reranking each held-out
-- premise's hypotheses (MAP, MRR@10, NDCG@10, as sentence-transformers'
-- CrossEncoderRerankingEvaluator). The checkpoints load in sentence-transformers' CrossEncoder
-- and rank with `trainer rerank CHECKPOINT QUERIES DOCS`.
--   bash scripts/prepare_nli_data.sh     # data/nli_train.jsonl.gz, data/nli_eval.jsonl.gz from data/'s SweNLI
--   bash scripts/fetch_minilm.sh         # the encoder, into models/
--   trainer recipes/reranker_swenli.lua
-- The listwise loss instead (each premise's entailed hypothesis against its contradiction):
--   trainer recipes/reranker_swenli.lua loss.name=cross_entropy data.build=nli_triplets \
--     'data.columns={"premise","hypothesis","label"}'
return {
  description = "reranker: BERT cross-encoder + bce on SweNLI pairs, MRR@10 / NDCG@10 on held-out premises",
  model = { from = "models/all-MiniLM-L6-v2", hub = "sentence-transformers/all-MiniLM-L6-v2",
            task = "cross_encoder", max_length = 128 },
  data = {
    train = "data/nli_train.jsonl.gz",
    eval = "data/nli_eval.jsonl.gz",
    columns = { "premise", "hypothesis", "label" },
    eval_columns = { "premise", "hypothesis", "label" },
    label_map = { entailment = 1, neutral = 0, contradiction = 0 },
    max_rows = 4000,
    hint = "run `bash scripts/prepare_nli_data.sh`: it makes both files from data/swenli_dev.jsonl.gz, which ships "
      .. "with the project",
  },
  loss = { name = "bce" },
  optim = { name = "adamw", lr = 5e-5 },
  schedule = { name = "linear", warmup_ratio = 0.1 },
  batch = { size = 16 },
  epochs = 1,
  eval = { every = 100 },
  save = { every = 100, keep = 2 },
  out = "runs/reranker_swenli",
}

-- recipes/reranker_swenli.lua — a cross-encoder (reranker): a one-logit head on a BERT encoder,
-- trained with bce on SweNLI pairs (premise, hypothesis): an entailed hypothesis is relevant
-- (1), a neutral or contradicting one is not (0). Evaluated by reranking each held-out
-- premise's hypotheses (MAP, MRR@10, NDCG@10, as sentence-transformers'
-- CrossEncoderRerankingEvaluator). The checkpoints load in sentence-transformers' CrossEncoder
-- and rank with `trainer rerank CHECKPOINT QUERIES DOCS`. The data, the encoder and the
-- schedule are recipes/base/swenli_pairs.lua's:
--   bash scripts/prepare_nli_data.sh     # data/nli_train.jsonl.gz, data/nli_eval.jsonl.gz from data/'s SweNLI
--   bash scripts/fetch_minilm.sh         # the encoder, into models/
--   trainer recipes/reranker_swenli.lua
-- The listwise loss instead (each premise's entailed hypothesis against its contradiction):
--   trainer recipes/reranker_swenli.lua loss.name=cross_entropy data.build=nli_triplets \
--     'data.columns={"premise","hypothesis","label"}'
return {
  extends = "base/swenli_pairs.lua",
  description = "reranker: BERT cross-encoder + bce on SweNLI pairs, MRR@10 / NDCG@10 on held-out premises",
  model = { task = "cross_encoder" },
  data = { label_map = { entailment = 1, neutral = 0, contradiction = 0 } },
  loss = { name = "bce" },
  out = "runs/reranker_swenli",
}

-- trainer.models.presets: named model shapes for `model = { arch = "bert", config = NAME }`
-- (random init) and for `trainer plan`. Fields are config.json's; vocabularies are the
-- original models' (bert-base-uncased, bert-large-uncased, all-MiniLM-L6/L12-v2).
return {
  tiny = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 64,
           max_position_embeddings = 64, vocab_size = 1000 },
  ["bert-base"] = { hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12, intermediate_size = 3072,
                    max_position_embeddings = 512, vocab_size = 30522 },
  ["bert-large"] = { hidden_size = 1024, num_hidden_layers = 24, num_attention_heads = 16, intermediate_size = 4096,
                     max_position_embeddings = 512, vocab_size = 30522 },
  ["minilm-l6"] = { hidden_size = 384, num_hidden_layers = 6, num_attention_heads = 12, intermediate_size = 1536,
                    max_position_embeddings = 512, vocab_size = 30522 },
  ["minilm-l12"] = { hidden_size = 384, num_hidden_layers = 12, num_attention_heads = 12, intermediate_size = 1536,
                     max_position_embeddings = 512, vocab_size = 30522 },
}

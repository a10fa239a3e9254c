-- trainer.recipe.keys: the one source of truth for recipe keys — type, range, allowed
-- values, default and a one-line doc for every recipe key.
-- `trainer check --keys` prints it and the README's key reference is generated from it
-- (tests/cli/test_readme_keys.sh fails when they differ). `aliases` are the names the
-- Hugging Face Trainer, PEFT and sentence-transformers give a key, suggested when a
-- recipe uses one ("learning_rate" -> optim.lr).
local S = require("trainer.recipe.schema")

local function path(t)
  t.path = true
  t.exists = require("trainer.core.fs").exists
  return S.string(t)
end

-- What a device name that is none of auto, cpu, cuda, cuda:N was probably meant to be.
local function device_hint(v)
  local n = v:lower():match("^gpu:?(%d*)$")
  if n then return (" (a GPU is \"cuda\"%s)"):format(n ~= "" and (", the GPU numbered " .. n .. " \"cuda:" .. n .. "\"") or "") end
  if v:match("^cuda:") then return " (N is the GPU's number, counted from 0: \"cuda:0\", \"cuda:1\", ...)" end
  return require("trainer.recipe.suggest").hint(v, { "auto", "cpu", "cuda" })
end

local model = S.record {
  doc = "the model: a Hugging Face folder (from) or an architecture built from a config",
  required = true,
  order = { "from", "hub", "arch", "config", "init", "tokenizer", "task", "num_labels", "labels", "pooling",
            "normalize", "max_length", "dropout" },
  fields = {
    from = path { doc = "Hugging Face or sentence-transformers model folder" },
    hub = S.string { pattern = "^[%w%._%-]+/[%w%._%-]+$", pattern_doc = "a Hugging Face model id such as \"org/name\"",
                     doc = "where model.from comes from on the Hugging Face hub (used in download hints)" },
    -- the model_types of trainer.models.registry, one line each there
    arch = S.string { enum = require("trainer.models.registry").model_types(),
                      doc = "architecture (model_type) of a model built from config; with from, config.json's must agree" },
    config = S.oneof { doc = "named preset or a table of config.json fields (hidden_size, ...)",
                       type_doc = "a preset name or a table",
                       alternatives = { S.string { enum = { "bert-base", "bert-large", "minilm-l6", "minilm-l12", "tiny" } },
                                        S.map { of = S.any {} } } },
    init = S.string { enum = { "pretrained", "random" }, doc = "load weights from `from`, or random init" },
    tokenizer = path { doc = "folder with tokenizer.json or vocab.txt (default: the model folder)" },
    task = S.string { enum = { "embedding", "classification", "cross_encoder" }, default = "embedding",
                      doc = "sentence embeddings (pooling), a sequence-classification head, or a cross-encoder (reranker: one score per text pair)" },
    num_labels = S.integer { gt = 0, doc = "classes of the classification head (default: the config's)" },
    labels = S.list { of = S.string {}, doc = "class names in id order (default: the config's id2label)" },
    pooling = S.string { enum = { "mean", "cls", "max", "mean_sqrt_len" },
                         doc = "sentence pooling (default: the folder's 1_Pooling config, else mean)" },
    normalize = S.boolean { doc = "L2-normalise embeddings (default: the folder's 2_Normalize)" },
    max_length = S.integer { gt = 0, aliases = { "max_seq_length" }, doc = "tokens per text; longer texts are truncated (default: the model's limit; a value above the model's "
                             .. "max_position_embeddings is cut to it, with a warning)" },
    dropout = S.number { min = 0, lt = 1, doc = "overrides the config's hidden and attention dropout" },
  },
  check = function(m, err)
    if m.from == nil and m.arch == nil then
      err("", "give model.from (a Hugging Face model folder) or model.arch with model.config")
    end
    if m.arch ~= nil and m.from == nil and m.config == nil then
      err("config", "is required with model.arch: a preset name such as \"bert-base\" or a table of config fields")
    end
    if m.init == "pretrained" and m.from == nil then
      err("init", "\"pretrained\" needs model.from; use init = \"random\" to build from model.config")
    end
  end,
}

-- One of several training datasets (data.train = { name = { file = ... } }).
local train_set = S.record {
  doc = "one training dataset of several",
  order = { "file", "columns", "prompts", "loss", "format", "max_rows" },
  fields = {
    file = path { required = true, doc = "the dataset's file: .jsonl, .tsv or .csv, optionally .gz" },
    columns = S.list { of = S.string {}, min_items = 1, doc = "its fields fed to the loss (default: data.columns, or the file's layout)" },
    prompts = S.oneof { type_doc = "a string or a table", doc = "its prompts (as data.prompts)",
                        alternatives = { S.string {}, S.map { of = S.string {} } } },
    format = S.string { enum = { "auto", "jsonl", "tsv", "csv" }, doc = "its file format (default: data.format)" },
    max_rows = S.integer { gt = 0, doc = "use only its first N rows" },
  },
}

local data = S.record {
  doc = "training and evaluation data",
  order = { "train", "sampler", "eval", "columns", "eval_columns", "prompts", "format", "build", "label_map", "filter",
            "shuffle", "bucket", "max_rows", "skip_bad", "hint" },
  fields = {
    train = S.oneof { type_doc = "a path or a table of datasets",
                      doc = "training file: .jsonl, .tsv or .csv, optionally .gz; or several datasets by name, "
                        .. "{ nli = { file = ..., columns = ..., prompts = ..., loss = { ... } }, ... }, whose batches never mix",
                      alternatives = { path {}, S.map { of = train_set } } },
    sampler = S.string { enum = { "default", "group_by_label", "proportional", "round_robin" }, default = "default",
                         doc = "default: shuffled rows (several training datasets: proportional); group_by_label: several rows "
                           .. "of each label in every batch (even batch.size >= 4), for batch_*_triplet; with several training "
                           .. "datasets, proportional (each batch's dataset drawn in proportion to its batches) or round_robin "
                           .. "(one of each in turn until one runs out), sentence-transformers' multi-dataset samplers" },
    eval = path { doc = "evaluation file (STS pairs with scores, or labelled NLI pairs)" },
    columns = S.list { of = S.string {}, min_items = 1,
                       doc = "record fields fed to the loss in order: texts first, then the score or label" },
    eval_columns = S.list { of = S.string {}, min_items = 1, doc = "fields of the eval file (default: sentence1, sentence2, score or label)" },
    prompts = S.oneof { type_doc = "a string or a table", doc = "text put before the texts as sentence-transformers' prompts: one "
                        .. "for every text column, or { column = \"query: \" }, or with several training datasets "
                        .. "{ dataset = either }; saved in checkpoints' config_sentence_transformers.json",
                        alternatives = { S.string {}, S.map { of = S.oneof { type_doc = "a string or a table",
                          alternatives = { S.string {}, S.map { of = S.string {} } } } } } },
    format = S.string { enum = { "auto", "jsonl", "tsv", "csv" }, default = "auto", doc = "file format (auto: by extension)" },
    build = S.string { enum = { "rows", "nli_triplets" }, default = "rows",
                       doc = "rows as they are, or NLI rows turned into (anchor, positive, hard negative) triplets" },
    label_map = S.map { of = S.oneof { alternatives = { S.number {}, S.string {} } }, doc = "maps label values (e.g. names to ids)" },
    filter = S.func { doc = "function(row) returning true for the rows to keep" },
    shuffle = S.boolean { default = true, doc = "shuffle training rows each epoch (seeded)" },
    bucket = S.boolean { default = false, doc = "batch rows of similar length together to cut padding" },
    max_rows = S.integer { gt = 0, doc = "use only the first N rows (quick experiments)" },
    skip_bad = S.boolean { default = false, doc = "skip and count malformed lines instead of stopping (the count and the first one are printed "
                          .. "before training and kept in summary.json)" },
    hint = S.string { doc = "how to obtain the data files, shown when one is missing" },
  },
}

local loss = S.record {
  doc = "the training objective",
  order = { "name", "scale", "symmetric", "cached", "mini_batch", "score_scale", "dims", "weights", "inner",
            "num_labels", "label_smoothing", "margin", "distance", "teacher", "temperature", "margin_strategy",
            "contrast_anchors", "contrast_positives", "pos_weight", "n_layers_per_step", "last_layer_weight",
            "prior_layers_weight", "kl_div_weight", "kl_temperature" },
  fields = {
    name = S.string { enum = { "mnrl", "cosent", "cosine", "softmax", "cross_entropy", "matryoshka", "contrastive",
                               "online_contrastive", "triplet", "batch_hard_triplet", "batch_semi_hard_triplet",
                               "batch_all_triplet", "mse", "margin_mse", "angle", "gist", "bce", "adaptive_layer" }, default = "mnrl",
                      doc = "mnrl (in-batch negatives), cosent, cosine (MSE), softmax (SoftmaxLoss), cross_entropy (a cross-encoder's: "
                        .. "listwise over each query's positive and negatives), matryoshka, "
                         .. "contrastive / online_contrastive (pairs labelled 1 or 0), triplet (anchor, positive, negative), "
                         .. "batch_hard_triplet / batch_semi_hard_triplet / batch_all_triplet (one text column and a class label), "
                         .. "mse / margin_mse (distillation: the teacher's embeddings or margins as the label, or loss.teacher), "
                         .. "angle (AnglE: CoSENT over the angle similarity), gist (GISTEmbed: mnrl with a guide model, loss.teacher), "
                        .. "bce (cross-encoder: scored pairs), adaptive_layer (AdaptiveLayerLoss: inner on the final and "
                        .. "on earlier layers' pooled outputs)" },
    scale = S.number { gt = 0, default = 20, doc = "similarity scale of mnrl, cosent and angle" },
    symmetric = S.boolean { default = false, doc = "mnrl: also rank anchors given positives" },
    cached = S.boolean { default = false, doc = "mnrl, gist: GradCache, activation memory bounded by mini_batch" },
    mini_batch = S.integer { gt = 0, default = 32, doc = "cached mnrl or gist: texts embedded at once" },
    score_scale = S.number { gt = 0, default = 1, doc = "cosine and bce: divide gold scores by this (5 for 0-5 STS scores) to get [0, 1]" },
    dims = S.list { of = S.integer { gt = 0 }, min_items = 1, doc = "matryoshka: embedding sizes to train" },
    weights = S.list { of = S.number { min = 0 }, min_items = 1, doc = "matryoshka: weight of each size's loss (default 1 each)" },
    inner = S.string { enum = { "mnrl", "cosent", "cosine", "angle", "contrastive", "online_contrastive", "triplet",
                                "batch_hard_triplet", "batch_semi_hard_triplet", "batch_all_triplet", "mse", "margin_mse",
                                "gist" },
                       default = "mnrl", doc = "matryoshka: the loss applied at each size (not mse, margin_mse, gist); "
                         .. "adaptive_layer: the loss applied at each layer" },
    num_labels = S.integer { gt = 1, doc = "softmax: number of classes" },
    label_smoothing = S.number { min = 0, lt = 1, default = 0, doc = "cross_entropy: label smoothing" },
    margin = S.number { min = 0, doc = "contrastive, online_contrastive: distance margin of negatives (default 0.5); triplet, "
                        .. "batch_*_triplet: margin between positive and negative distance (default 5); gist: "
                        .. "how far below the positive's guide score a negative may be and still be dropped (default 0)" },
    distance = S.string { enum = { "euclidean", "cosine", "manhattan" },
                          doc = "contrastive, online_contrastive: default cosine (1 - cos); triplet, batch_*_triplet: default "
                             .. "euclidean (manhattan: not for batch_*_triplet)" },
    teacher = path { doc = "mse, margin_mse: the teacher's model folder, gist: the guide's (embeds each batch without "
                        .. "gradients, in bf16 on a GPU); without it the label column holds the teacher's embeddings or margins" },
    temperature = S.number { gt = 0, default = 0.01, doc = "gist: temperature dividing the cosine scores" },
    margin_strategy = S.string { enum = { "absolute", "relative" }, default = "absolute",
                                 doc = "gist: a negative is dropped when the guide scores it above the positive's score less "
                                    .. "loss.margin (absolute) or less |score| * loss.margin (relative)" },
    contrast_anchors = S.boolean { default = true, doc = "gist: anchors are negatives of each other" },
    contrast_positives = S.boolean { default = true, doc = "gist: positives are negatives of each other" },
    n_layers_per_step = S.integer { min = -1, default = 1,
                                    doc = "adaptive_layer: earlier layers drawn per step besides the last (-1: all)" },
    last_layer_weight = S.number { min = 0, default = 1, doc = "adaptive_layer: weight of the final layer's loss" },
    prior_layers_weight = S.number { min = 0, default = 1, doc = "adaptive_layer: weight of the earlier layers' losses" },
    kl_div_weight = S.number { min = 0, default = 1, doc = "adaptive_layer: weight of the KL term" },
    kl_temperature = S.number { min = 0, default = 0.3, doc = "adaptive_layer: temperature of the KL term (0: none)" },
    pos_weight = S.number { gt = 0, default = 1, doc = "bce: weight of the positive term (negatives per positive, for unbalanced pairs)" },
  },
  check = function(l, err)
    if l.cached and l.name ~= "mnrl" and l.name ~= "gist" then
      err("cached", "only mnrl and gist have a cached form; remove loss.cached or use name = \"mnrl\" or \"gist\"")
    end
    if l.name == "matryoshka" and (l.inner == "mse" or l.inner == "margin_mse" or l.inner == "gist") then
      err("inner", "matryoshka takes a distance loss or angle, not " .. l.inner)
    end
    if l.name == "adaptive_layer" and l.n_layers_per_step == 0 then
      err("n_layers_per_step", "must be -1 (all layers) or a positive number")
    end
    if l.name == "matryoshka" and not l.dims then err("dims", "is required with name = \"matryoshka\", e.g. { 768, 512, 256 }") end
    if l.weights and l.dims and #l.weights ~= #l.dims then
      err("weights", ("must list one number per entry of loss.dims (%d), got %d"):format(#l.dims, #l.weights))
    end
    if l.distance == "manhattan" and l.name:match("^batch_") then
      err("distance", "batch_*_triplet losses take \"euclidean\" or \"cosine\"")
    end
    local takes = { mse = true, margin_mse = true, gist = true }
    if l.teacher and not (takes[l.name] or (l.name == "adaptive_layer" and takes[l.inner])) then
      err("teacher", "only the distillation losses (mse, margin_mse) and gist (its guide) take a teacher (also as "
        .. "adaptive_layer's inner)")
    end
    if l.name == "softmax" and not l.num_labels then
      err("num_labels", "is required with name = \"softmax\": the number of classes (e.g. 3 for NLI)")
    end
  end,
}

-- a dataset's own loss (one of several training datasets): the loss record again
train_set.fields.loss = S.record { doc = "its loss (default: the recipe's loss)", order = loss.order, fields = loss.fields,
                                   check = loss.check }

local optim = S.record {
  doc = "the optimizer",
  order = { "name", "lr", "weight_decay", "betas", "eps", "momentum", "dampening", "nesterov", "beta1",
            "eps1", "eps2", "clip_threshold", "decay_rate", "relative_step", "scale_parameter", "warmup_init" },
  fields = {
    name = S.string { enum = { "adamw", "sgd", "adafactor" }, default = "adamw", doc = "optimizer" },
    lr = S.number { gt = 0, default = 2e-5, aliases = { "learning_rate" }, doc = "peak learning rate" },
    weight_decay = S.number { min = 0, default = 0.01, doc = "decoupled weight decay (not on biases and LayerNorm)" },
    betas = S.list { of = S.number { min = 0, lt = 1 }, min_items = 2, max_items = 2, default = { 0.9, 0.999 },
                     doc = "AdamW moment decay rates" },
    eps = S.number { gt = 0, default = 1e-8, doc = "AdamW epsilon" },
    momentum = S.number { min = 0, lt = 1, default = 0, doc = "SGD momentum" },
    nesterov = S.boolean { default = false, doc = "SGD Nesterov momentum" },
    dampening = S.number { min = 0, lt = 1, doc = "SGD dampening of the momentum (default 0)" },
    beta1 = S.number { min = 0, lt = 1, doc = "Adafactor: first-moment decay (default: none, no first moment)" },
    eps1 = S.number { gt = 0, doc = "Adafactor: regulariser of the squared gradient (default 1e-30)" },
    eps2 = S.number { gt = 0, doc = "Adafactor: relative-step floor of the parameter scale (default 1e-3)" },
    clip_threshold = S.number { gt = 0, doc = "Adafactor: update RMS clipping threshold (default 1)" },
    decay_rate = S.number { lt = 0, doc = "Adafactor: second-moment decay exponent (default -0.8)" },
    relative_step = S.boolean { doc = "Adafactor: time-dependent lr instead of optim.lr (default: false when lr is set)" },
    scale_parameter = S.boolean { doc = "Adafactor: scale the lr by the parameter RMS (default: as relative_step)" },
    warmup_init = S.boolean { doc = "Adafactor: warm-up with relative steps (default false)" },
  },
}

local schedule = S.record {
  doc = "the learning-rate schedule",
  order = { "name", "warmup_ratio", "warmup_steps", "num_cycles", "power", "lr_end" },
  fields = {
    name = S.string { enum = { "constant", "linear", "cosine", "polynomial" }, default = "linear", aliases = { "lr_scheduler_type" }, doc = "schedule after warm-up" },
    warmup_ratio = S.number { min = 0, max = 1, doc = "warm-up as a fraction of all steps" },
    warmup_steps = S.integer { min = 0, doc = "warm-up in optimizer steps" },
    num_cycles = S.number { gt = 0, default = 0.5, doc = "cosine: number of half-waves after warm-up" },
    power = S.number { gt = 0, default = 1, doc = "polynomial: exponent" },
    lr_end = S.number { min = 0, default = 1e-7, doc = "polynomial: final learning rate" },
  },
  check = function(s, err)
    if s.warmup_ratio and s.warmup_steps then err("", "give warmup_ratio or warmup_steps, not both") end
  end,
}

local checkpoint = S.oneof {
  doc = "gradient checkpointing: false, \"auto\" (the segmentation of least peak memory for the shape; trainer plan lists each choice), { segments = n } or { every = k }",
  type_doc = "false, \"auto\" or a table", default = false, aliases = { "gradient_checkpointing" },
  alternatives = {
    S.const { value = false },
    S.string { enum = { "auto" } },
    S.record { short = "{ segments = n }", fields = { segments = S.integer { gt = 0, doc = "checkpoint the encoder in n segments" } } },
    S.record { short = "{ every = k }", fields = { every = S.integer { gt = 0, doc = "one checkpoint every k layers" } } },
  },
}

local lora = S.oneof {
  doc = "LoRA adapters (PEFT semantics) on the Linear layers named in targets, or false",
  type_doc = "false or a table", default = false,
  alternatives = {
    S.const { value = false },
    S.record {
      order = { "r", "alpha", "dropout", "targets", "rslora", "bias", "modules_to_save" },
      fields = {
        r = S.integer { gt = 0, default = 8, doc = "adapter rank" },
        alpha = S.number { gt = 0, default = 16, aliases = { "lora_alpha" }, doc = "scale numerator: scale = alpha / r (alpha / sqrt(r) with rslora)" },
        dropout = S.number { min = 0, lt = 1, default = 0, aliases = { "lora_dropout" }, doc = "dropout on the LoRA input" },
        targets = S.list { of = S.string {}, aliases = { "target_modules" },
                           doc = "module-name suffixes to adapt, like PEFT's target_modules (e.g. query, value); "
                             .. "default: PEFT's for the model's family (query, value; DistilBERT's q_lin, v_lin; MPNet's q, v; ModernBERT's Wqkv, Wi)" },
        rslora = S.boolean { default = false, aliases = { "use_rslora" }, doc = "rank-stabilised scale alpha / sqrt(r)" },
        bias = S.string { enum = { "none", "all", "lora_only" }, default = "none", doc = "which biases train" },
        modules_to_save = S.list { of = S.string {}, doc = "modules trained fully and saved with the adapter (e.g. classifier)" },
      },
      check = function(l, err)
        if type(l.targets) == "table" and #l.targets == 0 then
          err("targets", "is empty: give the module-name suffixes to adapt, e.g. { \"query\", \"value\" }, or leave "
            .. "it out for PEFT's defaults of the model's family")
        end
      end,
    },
  },
}

-- One evaluator of eval.sets (trainer.train.eval_sets): its type and its data.
local eval_set = S.record {
  doc = "one evaluator of eval.sets",
  order = { "type", "folder", "split", "corpus", "queries", "qrels", "file", "columns", "similarity_fn_names",
            "corpus_chunk_size", "query_prompt", "corpus_prompt", "query_prompt_name", "corpus_prompt_name",
            "accuracy_at_k", "precision_recall_at_k", "mrr_at_k",
            "ndcg_at_k", "map_at_k", "margin" },
  fields = {
    type = S.string { enum = { "ir", "triplet", "binary", "sts", "nli" }, required = true,
                      doc = "ir (information retrieval), triplet, binary (pair classification), sts or nli" },
    folder = path { doc = "ir: a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)" },
    split = S.string { default_doc = "test", doc = "ir: the qrels file of the BEIR folder, qrels/<split>.tsv" },
    corpus = path { doc = "ir: corpus JSONL (_id, title, text), with queries and qrels instead of folder" },
    queries = path { doc = "ir: queries JSONL (_id, text)" },
    qrels = path { doc = "ir: TSV of query-id, corpus-id, score (score > 0 is relevant)" },
    file = path { doc = "triplet, binary, sts, nli: the data file (.jsonl, .tsv or .csv)" },
    columns = S.list { of = S.string {}, min_items = 3, max_items = 3,
                       doc = "fields of file (default: anchor, positive, negative; or sentence1, sentence2, label/score)" },
    similarity_fn_names = S.list { of = S.string { enum = { "cosine", "dot" } }, min_items = 1,
                                   doc = "ir, triplet, binary: similarities to report (default: cosine)" },
    corpus_chunk_size = S.integer { gt = 0, doc = "ir: documents embedded and searched at once (default 50000)" },
    query_prompt = S.string { doc = "ir: text put before every query (e.g. \"query: \")" },
    corpus_prompt = S.string { doc = "ir: text put before every document (e.g. \"passage: \")" },
    query_prompt_name = S.string { doc = "ir: the model's prompt of this name before every query (its config_sentence_transformers.json)" },
    corpus_prompt_name = S.string { doc = "ir: the model's prompt of this name before every document" },
    accuracy_at_k = S.list { of = S.integer { gt = 0 }, min_items = 1, default_doc = "{ 1, 3, 5, 10 }", doc = "ir: k of accuracy@k" },
    precision_recall_at_k = S.list { of = S.integer { gt = 0 }, min_items = 1, default_doc = "{ 1, 3, 5, 10 }",
                                     doc = "ir: k of precision@k and recall@k" },
    mrr_at_k = S.list { of = S.integer { gt = 0 }, min_items = 1, default_doc = "{ 10 }", doc = "ir: k of mrr@k" },
    ndcg_at_k = S.list { of = S.integer { gt = 0 }, min_items = 1, default_doc = "{ 10 }", doc = "ir: k of ndcg@k" },
    map_at_k = S.list { of = S.integer { gt = 0 }, min_items = 1, default_doc = "{ 100 }", doc = "ir: k of map@k" },
    margin = S.number { doc = "triplet: sim(a, p) must exceed sim(a, n) by this much (default 0)" },
  },
  check = function(v, err)
    if v.type == "ir" then
      if not v.folder and not (v.corpus and v.queries and v.qrels) then
        err("", "type \"ir\" needs folder (a BEIR folder) or corpus, queries and qrels")
      end
    elseif v.type and not v.file then
      err("file", ("is required for type %q"):format(v.type))
    end
  end,
}

local M = S.record {
  doc = "a recipe",
  order = { "name", "description", "extends", "requires", "device", "seed", "model", "data", "loss", "optim", "schedule",
            "batch", "epochs", "steps", "precision", "checkpoint", "lora", "grad_clip", "eval", "save", "early_stopping",
            "log", "resume", "memory", "distributed", "out", "overwrite", "hooks", "loop" },
  fields = {
    name = S.string { doc = "a short name for the run (default: the recipe's file name)" },
    description = S.string { doc = "what this recipe is for, for the people you share it with" },
    extends = S.string { doc = "parent recipe, found next to this file, then on TRAINER_RECIPE_PATH, then in recipes/: tables merge key by key, lists and values replace" },
    requires = S.string { doc = "the trainer versions the recipe works with, e.g. \">= 0.4\" or \">= 0.4, < 0.6\" (>=, >, <=, <, =); checked before any key" },
    device = S.string { patterns = { "^auto$", "^cpu$", "^cuda$", "^cuda:%d+$" }, default = "auto", hint = device_hint,
                        pattern_doc = "\"auto\", \"cpu\", \"cuda\" or \"cuda:N\"", doc = "where to train (auto: cuda when a GPU is visible)" },
    seed = S.integer { min = 0, default = 42, doc = "seed of shuffling, initialisation and dropout" },
    model = model,
    data = data,
    loss = S.record { default_table = true, doc = loss.doc, order = loss.order, fields = loss.fields, check = loss.check },
    optim = S.record { default_table = true, doc = optim.doc, order = optim.order, fields = optim.fields },
    schedule = S.record { default_table = true, doc = schedule.doc, order = schedule.order, fields = schedule.fields, check = schedule.check },
    batch = S.record {
      default_table = true, doc = "batching", order = { "size", "accumulate", "effective" },
      fields = {
        size = S.oneof { default = 16, aliases = { "batch_size", "per_device_train_batch_size", "auto_find_batch_size" },
                         type_doc = "a positive integer or \"auto\"", narrow = true,
                         doc = "examples per micro-batch; \"auto\": the largest that the memory plan fits in the budget "
                           .. "(memory.limit or the device), with accumulate set to keep batch.effective",
                         alternatives = { S.integer { gt = 0 }, S.string { enum = { "auto" } } } },
        accumulate = S.integer { gt = 0, default = 1, aliases = { "gradient_accumulation_steps" }, doc = "micro-batches per optimizer step (gradient accumulation)" },
        effective = S.integer { gt = 0, doc = "rows per optimizer step (per process under mpirun) that batch.size = \"auto\" and memory.fit keep "
                                .. "(default: batch.size x accumulate, 16 x accumulate with \"auto\")" },
      },
      check = function(b, err)
        if type(b.size) == "number" and b.effective and b.effective ~= b.size * (b.accumulate or 1) then
          err("effective", ("%d is not batch.size x batch.accumulate = %d x %d = %d: set batch.size = \"auto\" to let "
            .. "the memory plan choose the micro-batch, or remove batch.effective"):format(b.effective, b.size,
            b.accumulate or 1, b.size * (b.accumulate or 1)))
        end
      end,
    },
    epochs = S.number { gt = 0, default = 1, aliases = { "num_train_epochs" }, doc = "passes over the training data" },
    steps = S.integer { gt = 0, aliases = { "max_steps" }, doc = "optimizer steps to run (overrides epochs)" },
    precision = S.string { enum = { "fp32", "bf16", "fp16" }, default = "fp32",
                           doc = "fp32, or bf16/fp16 mixed precision (half activations, fp32 master weights)" },
    checkpoint = checkpoint,
    lora = lora,
    grad_clip = S.oneof { default = 1.0, aliases = { "max_grad_norm" }, doc = "clip gradients to this global L2 norm, or false",
                          type_doc = "a positive number or false",
                          alternatives = { S.number { gt = 0 }, S.const { value = false } } },
    eval = S.record {
      default_table = true, doc = "evaluation",
      order = { "every", "at_start", "batch_size", "fn", "sets", "primary", "greater_is_better" },
      fields = {
        every = S.integer { gt = 0, aliases = { "eval_steps" }, doc = "evaluate every N optimizer steps (and always at the end)" },
        at_start = S.boolean { default = true, doc = "also evaluate before training, to show the gain" },
        batch_size = S.integer { gt = 0, default = 64, doc = "texts embedded at once during evaluation" },
        fn = S.func { doc = "custom evaluator: function(t) returning a table of metric = value" },
        sets = S.map { of = eval_set, doc = "evaluators by name: { name = { type = \"ir\", folder = ... }, ... }; "
                       .. "metrics are reported as name_metric (e.g. scifact_cosine_ndcg@10)" },
        primary = S.string { aliases = { "metric_for_best_model" },
                             doc = "the metric that decides the best checkpoint, e.g. \"scifact_cosine_ndcg@10\"" },
        greater_is_better = S.boolean { default_doc = "true (false for a metric named *loss*)",
                                        doc = "whether a higher eval.primary is better" },
      },
    },
    save = S.record {
      default_table = true, doc = "checkpoints", order = { "every", "keep", "final", "best" },
      fields = {
        every = S.integer { gt = 0, aliases = { "save_steps" }, doc = "save a checkpoint every N optimizer steps" },
        keep = S.integer { gt = 0, default = 3, aliases = { "save_total_limit" }, doc = "keep the last K checkpoints" },
        final = S.boolean { default = true, doc = "save at the end of the run" },
        best = S.boolean { default = false, aliases = { "load_best_model_at_end" },
                           doc = "keep the checkpoint with the best eval.primary (never pruned by save.keep) and copy "
                             .. "it to out/best at the end" },
      },
    },
    early_stopping = S.record {
      doc = "end the run when eval.primary stops improving", order = { "patience", "threshold" },
      fields = {
        patience = S.integer { gt = 0, required = true, aliases = { "early_stopping_patience" },
                               doc = "evaluations in a row without improvement that end the run" },
        threshold = S.number { min = 0, default = 0, aliases = { "early_stopping_threshold" },
                               doc = "an improvement must exceed this to count" },
      },
    },
    log = S.record {
      default_table = true, doc = "progress output and TensorBoard event files", order = { "every", "quiet", "tensorboard" },
      fields = {
        every = S.integer { gt = 0, default = 10, aliases = { "logging_steps" }, doc = "write a progress line every N steps (when not a terminal)" },
        quiet = S.boolean { default = false, doc = "no progress output" },
        tensorboard = S.boolean { default = true, aliases = { "report_to" },
                                  doc = "write TensorBoard event files into out/tb/ (`tensorboard --logdir runs`)" },
      },
    },
    resume = S.string { doc = "\"latest\" or a checkpoint folder such as runs/x/checkpoint-200" },
    memory = S.record {
      doc = "allocator settings", order = { "limit", "max_split_size", "fit" },
      fields = {
        limit = S.size { doc = "fail with the memory ledger beyond this many bytes (e.g. \"8GiB\")" },
        fit = S.boolean { default_doc = "false", doc = "when the memory plan does not fit the budget, apply the change of "
                          .. "least predicted step time that fits (checkpointing, the cached loss, accumulation, half "
                          .. "precision); `trainer plan --fit` shows it" },
        max_split_size = S.size { doc = "cached blocks at least this big are never split (limits fragmentation)" },
      },
    },
    distributed = S.record {
      doc = "data-parallel training under `mpirun -np N` (DDP semantics: effective batch batch.size x accumulate x N)",
      order = { "backend", "bucket", "overlap", "timeout" },
      fields = {
        backend = S.string { enum = { "auto", "mpi", "nccl" }, default = "auto",
                             doc = "collective: auto (NCCL when every rank has a GPU, else MPI), mpi or nccl" },
        bucket = S.size { default = "25MiB", aliases = { "bucket_cap_mb" }, doc = "gradient all-reduce bucket size" },
        overlap = S.boolean { default = true, doc = "start each bucket's all-reduce while backward is still running "
                              .. "(DDP); false: every bucket after backward (for measuring)" },
        timeout = S.number { gt = 0, default = 300,
                             doc = "seconds a rank waits for the others before the run stops naming the missing rank" },
      },
    },
    out = S.string { aliases = { "output_dir" }, doc = "output folder (default: runs/<recipe name>)", default_doc = "runs/<recipe name>" },
    overwrite = S.boolean { default = false, aliases = { "overwrite_output_dir" },
                            doc = "a new run into an out folder that holds an earlier run's outputs removes them first "
                              .. "(without it such a run is refused); a resume never removes anything" },
    hooks = S.record {
      doc = "functions called by the default loop", order = { "on_step", "on_eval", "on_save" },
      fields = {
        on_step = S.func { doc = "function(t, metrics) after each optimizer step" },
        on_eval = S.func { doc = "function(t, scores) after each evaluation" },
        on_save = S.func { doc = "function(t, folder) after each checkpoint" },
      },
    },
    loop = S.func { doc = "function(t) replacing the default training loop" },
  },
}

-- ---------------------------------------------------------------- resolving
-- One user error listing problems (one or several).
local function raise(where, name, problems)
  local errors = require("trainer.core.errors")
  local prefix = where and (where .. ": ") or ""
  if #problems == 1 then errors.user("%s%s", prefix, problems[1]) end
  errors.user("%s%s has %d problems:\n  %s", prefix, name, #problems, table.concat(problems, "\n  "))
end

-- The recipe key `name` ("loss", "lora", "precision", ...) of value v, checked and with its
-- defaults filled in (a copy): what a module handed that part of a recipe by a script
-- (losses.new, lora.apply, amp.prepare) works from, so that the defaults and the checks of a
-- key are this file's alone. A value that does not check is one user error naming each key
-- as a recipe's would, after `where` (a file, as "x/adapter_config.json: ") when given.
function M.resolve(name, v, where)
  local resolved, problems = S.resolve(M.fields[name], v, name, { root = M })
  if problems then raise(where, name, problems) end
  return resolved
end

-- A copy of a recipe (whole, or the parts a test or script gives) with every default the
-- schema has filled in, unchecked: trainer.recipe's result already has them.
function M.with_defaults(recipe)
  return S.apply_defaults(M, S.copy(recipe))
end

-- One key's value by its dotted path ("loss.mini_batch", "precision"), checked, or the
-- key's default when v is nil: what a function given that one value reads.
function M.value(key, v, where)
  if v == nil then return S.copy(S.lookup(M, key).default) end
  local _, problems = S.resolve(S.lookup(M, key), v, key, { root = M })
  if problems then raise(where, key, problems) end
  return v
end

return M

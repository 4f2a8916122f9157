# mk/models.mk — whole models against their reference implementations
# (models/, docs/models.md). Needs the Python peers (make peers); not in CI.
#
# make test-models   BERT-base vs Hugging Face transformers (f32, bf16,
#                    int8 dynamic) and a 2-layer GraphSAGE vs PyTorch
#                    Geometric, one line per check with its figure.
#                    MODELS_THREADS sets the thread count (default 2).
#                    Also a 2-layer GQA Llama (models/llama.py): HF
#                    LlamaForCausalLM with random weights against
#                    build/models/llama_run (the graph of
#                    models/llama_graph.h), logits and greedy tokens in
#                    f32 (and examples/llama_generate on the exported IR),
#                    bf16 and int8 logits with teacher forcing, and
#                    over int8 KV caches (f32 and bf16 weights).

MODELS_PY      ?= bench/.venv/bin/python
MODELS_THREADS ?= 2

.PHONY: test-models
test-models: build/kern-run build/models/llama_run build/examples/llama_generate $(MODELS_PY)
	nice -n 10 $(MODELS_PY) models/bert.py --threads $(MODELS_THREADS)
	nice -n 10 $(MODELS_PY) models/graphsage.py --threads $(MODELS_THREADS)
	nice -n 10 $(MODELS_PY) models/llama.py --threads $(MODELS_THREADS)
	nice -n 10 $(MODELS_PY) models/llama.py --threads $(MODELS_THREADS) --dtype bf16
	nice -n 10 $(MODELS_PY) models/llama.py --threads $(MODELS_THREADS) --dtype int8
	nice -n 10 $(MODELS_PY) models/llama.py --threads $(MODELS_THREADS) --kv-int8
	nice -n 10 $(MODELS_PY) models/llama.py --threads $(MODELS_THREADS) --dtype bf16 --kv-int8
	nice -n 10 $(MODELS_PY) models/sam.py --threads $(MODELS_THREADS)

build/models/llama_run: models/llama_run.c models/llama_graph.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $< -o $@ $(LIBS)

# decode tokens/s of the graph Llama with random weights (no peers needed):
# build/models/llama_bench gemv|gemm [CONFIG [P STEPS]], see the file
build/models/llama_bench: models/llama_bench.c models/llama_graph.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $< -o $@ $(LIBS)

# the tiny-model test and the llm family's whole-model cases include the
# graph builder
build/tests/test_llm: models/llama_graph.h
build/bench/bench_llm.o: models/llama_graph.h

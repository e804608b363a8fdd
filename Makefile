# make demo   the main job (set-up included on a fresh machine)
# make test   every test: GoogleTest for runtime/, pytest for the plugin
# make test-kinds  pytest again as each weaker CPU kind runs it (env/cpu_kinds.py)
# ./dev CMD   any command inside the project environment
BUILD_DIR ?= build
PYTHON ?= python3
JOBS ?= $(shell nproc)

.PHONY: demo demo-small test test-kinds bench build check check-kinds clean

demo:
	./dev $(PYTHON) examples/hf_finetune_demo.py

demo-small:
	./dev $(PYTHON) examples/train_tiny_transformer.py

test:
	./dev $(MAKE) -s check

test-kinds:
	./dev $(MAKE) -s check-kinds

bench:
	./dev $(PYTHON) benchmarks/run_all.py

# The targets below run inside the environment (./dev calls `make build`).
build: $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS) >/dev/null || cmake --build $(BUILD_DIR) -j 1
	@test -f torch_neuronx/_C$$($(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
	@test torch_neuronx.egg-info/entry_points.txt -nt setup.py || $(PYTHON) setup.py -q egg_info >/dev/null 2>&1

$(BUILD_DIR)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD_DIR) -G Ninja -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) >/dev/null

check:
	cd $(BUILD_DIR) && ctest --output-on-failure
	$(PYTHON) -m pytest -q tests

# KINDS: the weaker kinds to run as (default: every kind below this CPU's own).
check-kinds:
	@for kind in $${KINDS:-$$($(PYTHON) env/cpu_kinds.py)}; do \
	  echo "== pytest as the $$kind kind"; \
	  $(PYTHON) env/cpu_kinds.py $$kind -- $(PYTHON) -m pytest -q tests || exit 1; \
	done

clean:
	rm -rf $(BUILD_DIR) torch_neuronx/_C*.so torch_neuronx.egg-info

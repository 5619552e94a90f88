# sluice: the entry points. `make demo` and `make test` do all set-up themselves on a fresh Debian machine (they call
# `make deps`, the only target that installs packages); `make build` only configures and compiles, into $(BUILD)/.
SHELL := /bin/bash
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DSL_WERROR=ON
endif

# Packages needed to build and test (Chromium renders the HTML reports in tests/integration/report_render.sh).
# The Python package's build and tests need Debian's python3-* (sluice.torch is tested, so python3-torch too;
# python3-torchvision for tests/python/test_torchvision_exact.py, sluice's image functions against torchvision's).
# Benchmark peers (torchvision, PIL) are separate. libacl1-dev and liblz4-dev: a static link against libsluice.a
# (pkg-config --static, tests/integration/install.sh) names them through libarchive; libnghttp2-dev librtmp-dev
# libssh2-1-dev libpsl-dev libkrb5-dev libldap-dev likewise through libcurl (remote data, docs/remote.md). nginx,
# its echo module, openssl and curl: the servers of the remote-data tests.
DEB_PKGS := build-essential cmake pkg-config clang libclang-rt-14-dev \
  libjansson-dev libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libwebp-dev libarchive-dev libacl1-dev liblz4-dev libglpk-dev libxgboost-dev \
  protobuf-c-compiler libprotobuf-c-dev libcmocka-dev libzstd-dev zlib1g-dev libisal-dev \
  libstb-dev libxxhash-dev libcurl4-openssl-dev \
  libnghttp2-dev librtmp-dev libssh2-1-dev libpsl-dev libkrb5-dev libldap-dev libpq-dev libsqlite3-dev sqlite3 postgresql python3 chromium \
  python3-dev python3-numpy python3-setuptools python3-pip python3-venv python3-pytest python3-torch \
  python3-torchvision openmpi-bin libopenmpi-dev nginx-light libnginx-mod-http-echo openssl curl
# SPDL's decoder loads FFmpeg's shared libraries (Debian's FFmpeg 5) at run time.
DEB_BENCH := python3-torch python3-torchvision python3-pil python3-numpy hyperfine \
  libavutil57 libavcodec59 libavformat59 libavfilter8 libavdevice59 libswscale6 libswresample4

FUZZ_SECONDS ?= 20

PREFIX ?= /usr/local

.PHONY: soak fuzz build-fuzz test-fuzz all deps deps-bench build build-asan build-tsan demo test test-plain test-asan test-tsan test-engine-only bench bench-quick bench-peers bench-remote peers-venv install clean

all: build

# Installs the Debian packages the build and the suite need (as root), or prints the apt-get line to run.
deps:
	@bash tools/deps.sh $(DEB_PKGS)

deps-bench: deps
	@bash tools/deps.sh $(DEB_BENCH)

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

# The CLI is $(BUILD)/sluice; the libraries $(BUILD)/libsluice.{a,so}. A configure error about a missing package:
# run `make deps`.
build:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null || { echo "build: cmake failed; missing packages? run: make deps" >&2; exit 1; }
	cmake --build $(BUILD) -j $(JOBS)

build-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSL_SANITIZE=address,undefined $(CMAKE_FLAGS) >/dev/null
	cmake --build build-asan -j $(JOBS)

build-tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSL_SANITIZE=thread $(CMAKE_FLAGS) >/dev/null
	cmake --build build-tsan -j $(JOBS)

demo: deps
	$(MAKE) build
	bash tools/demo.sh $(BUILD)/sluice

test: deps
	$(MAKE) test-plain test-asan test-tsan test-fuzz test-python test-python-torch2
	@echo "make test: plain, ASan+UBSan, TSan suites, $(FUZZ_SECONDS) s of each fuzz target and the Python package (also under torch 2) passed"

test-plain: build s3-venv
	cd $(BUILD) && SL_S3_REQUIRED=1 ctest --output-on-failure -j $(JOBS)

test-asan: build-asan s3-venv
	cd build-asan && SL_S3_REQUIRED=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS)

test-tsan: build-tsan
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --output-on-failure -j $(JOBS) -L threaded

# The S3-compatible server tests/integration/remote_s3.sh starts (moto's server mode, from PyPI, pinned whole in
# tests/integration/s3-requirements.txt) in build/s3-venv, made again when the pins change. The test skips without it
# unless SL_S3_REQUIRED=1 (as make test runs it).
S3_VENV := build/s3-venv
.PHONY: s3-venv
s3-venv: $(S3_VENV)/.installed
$(S3_VENV)/.installed: tests/integration/s3-requirements.txt
	rm -rf $(S3_VENV) && $(PYTHON) -m venv $(S3_VENV)
	$(S3_VENV)/bin/python -m pip install -q -r $<
	touch $@

# The engine alone (-DSL_WITH_PROV=OFF: no SQLite, libpq or XGBoost) builds and passes its tests; .ci/run runs it.
test-engine-only:
	cmake -S . -B build-engine -DSL_WITH_PROV=OFF -DSL_BUILD_BENCH=OFF $(CMAKE_FLAGS) >/dev/null
	cmake --build build-engine -j $(JOBS)
	cd build-engine && ctest --output-on-failure -j $(JOBS)

build-fuzz:
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DSL_FUZZ=ON -DSL_BUILD_TESTS=OFF -DSL_BUILD_BENCH=OFF $(CMAKE_FLAGS) >/dev/null
	cmake --build build-fuzz -j $(JOBS)

# Runs every fuzz target for FUZZ_SECONDS on a copy of its seed corpus (tests/fuzz/corpus/<name>).
fuzz test-fuzz: build-fuzz
	bash tools/fuzz.sh build-fuzz $(FUZZ_SECONDS)

# 50 million elements through parallel map + shuffle + prefetch, and 1000 start/stop cycles.
soak: build
	$(BUILD)/soak 50000000 1000

bench: deps-bench
	$(MAKE) build peers-venv
	python3 bench/run $(BUILD)/sluice

# The peers of issue 40 (tf.data, DALI on the CPU, SPDL, torch + torchvision; bench/peers/requirements.txt pins
# them) in a virtual environment under $(BUILD), from PyPI, made again when the pins change. Measuring only:
# nothing else depends on it.
PEERS_VENV := $(BUILD)/peers-venv
peers-venv: $(PEERS_VENV)/.installed
$(PEERS_VENV)/.installed: bench/peers/requirements.txt
	rm -rf $(PEERS_VENV) && $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q -r bench/peers/requirements.txt
	touch $@

# Only the peers section: each suite pipeline in every peer that can express it, alternating with sluice's plan;
# spliced into BENCHMARKS.md.
bench-peers: deps-bench
	$(MAKE) build peers-venv
	python3 bench/run --peers-only $(BUILD)/sluice

# Remote data (issue 50): the imagenet pipeline over HTTP from nginx in a network namespace with a tc tbf rate cap
# and 50 ms to first byte; the plan against AUTOTUNE and webdataset + DataLoader. Needs root; not in make test.
bench-remote: deps-bench
	$(MAKE) build peers-venv
	python3 bench/remote.py $(BUILD)/sluice

bench-quick: build
	python3 bench/run --quick $(BUILD)/sluice

# make install PREFIX=DIR [DESTDIR=STAGE]: DIR/bin/sluice, DIR/lib/libsluice.{a,so*}, DIR/include/sluice{.h,/},
# DIR/lib/pkgconfig/sluice.pc (relocatable: it finds the prefix from its own place).
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-tsan build-fuzz build-engine

# ---- Python package (python/, docs/python.md): Debian's interpreter, offline, libsluice linked in statically.
.PHONY: python test-python test-python-torch2
PYTHON := /usr/bin/python3
# Into the active virtual environment, else (Debian marks its own site-packages as externally managed) for the
# user (~/.local).
PIP_USER := $(if $(VIRTUAL_ENV),,--user --break-system-packages)
PYVENV := $(BUILD)/pyvenv

python: build
	SLUICE_BUILD_DIR=$(abspath $(BUILD)) $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV)/bin/python,$(PYTHON)) -m pip install --no-build-isolation --no-deps $(PIP_USER) ./python

# The real ml-metadata library that tests/python/test_mlmd.py checks the provenance store against, pinned: 1.17.1 is
# the newest release with a wheel for Debian 12 (glibc 2.36; 1.18 and later are built for glibc 2.39). It goes into
# the test venv from PyPI; where it cannot install, the test is skipped saying why (pip's last line).
MLMD_VERSION ?= 1.17.1

# The install path a user takes, in a throw-away venv that sees Debian's numpy/torch/pytest; then the pytest suite.
test-python: build
	rm -rf $(PYVENV) && $(PYTHON) -m venv --system-site-packages $(PYVENV)
	SLUICE_BUILD_DIR=$(abspath $(BUILD)) $(PYVENV)/bin/python -m pip install -q --no-build-isolation --no-deps ./python
	@if $(PYVENV)/bin/python -m pip install -q ml-metadata==$(MLMD_VERSION) >$(PYVENV)/mlmd-pip.log 2>&1; then \
	  rm -f $(PYVENV)/mlmd-skip; \
	else \
	  grep -v '^WARNING' $(PYVENV)/mlmd-pip.log | tail -1 >$(PYVENV)/mlmd-skip; \
	  echo "test-python: ml-metadata==$(MLMD_VERSION) did not install: $$(cat $(PYVENV)/mlmd-skip)" >&2; \
	fi
	cd tests/python && SLUICE_BUILD_DIR=$(abspath $(BUILD)) SLUICE_CLI=$(abspath $(BUILD))/sluice SLUICE_MLMD_REQUIRED=1 \
	  SLUICE_MLMD_SKIP="$$(cat $(abspath $(PYVENV))/mlmd-skip 2>/dev/null)" \
	  $(abspath $(PYVENV))/bin/python -m pytest -q -rs -p no:cacheprovider .

# ---- The wheel (issue 49, docs/python.md): a manylinux wheel that installs where Debian's packages are not. The
# library is built for it in $(WHEEL_LIB) without MPI and with libpq loaded when a PostgreSQL store opens (both stay
# optional and say so when absent); pip builds the wheel against it in $(WHEEL_VENV) (the pinned tools and numpy 2),
# and auditwheel copies the shared libraries the extension and the CLI link into it (sluice.libs/). Release, as pip's
# own build of the package is; without CI's -Werror (GCC's -O2 flow analysis warns where the debug build does not).
.PHONY: wheel test-wheel
WHEEL_LIB := $(BUILD)/wheel-lib
WHEEL_VENV := $(BUILD)/wheel-venv
WHEEL_DIR := $(BUILD)/wheel
# The tag of this machine's glibc (Debian 12: manylinux_2_36_x86_64): the build's own libraries were built against
# it, so no older tag can hold the wheel (auditwheel show says which symbol versions constrain it).
WHEEL_PLAT ?= manylinux_$(subst .,_,$(word 2,$(shell getconf GNU_LIBC_VERSION)))_$(shell uname -m)
$(WHEEL_VENV)/.installed: python/wheel-requirements.txt
	rm -rf $(WHEEL_VENV) && $(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -q -r $<
	touch $@

wheel: $(WHEEL_VENV)/.installed
	cmake -S . -B $(WHEEL_LIB) -DCMAKE_BUILD_TYPE=Release -DSL_BUILD_TESTS=OFF -DSL_BUILD_BENCH=OFF \
	  -DSL_WITH_MPI=OFF -DSL_POSTGRES_DLOPEN=ON >/dev/null
	cmake --build $(WHEEL_LIB) -j $(JOBS) --target sluice_static sluice
	rm -rf $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)/linux
	SLUICE_BUILD_DIR=$(abspath $(WHEEL_LIB)) $(WHEEL_VENV)/bin/python -m pip wheel -q --no-build-isolation --no-deps \
	  -w $(WHEEL_DIR)/linux ./python
	PATH=$(abspath $(WHEEL_VENV))/bin:$$PATH $(WHEEL_VENV)/bin/auditwheel repair --plat $(WHEEL_PLAT) \
	  -w $(WHEEL_DIR) $(WHEEL_DIR)/linux/sluice-*.whl
	$(WHEEL_VENV)/bin/auditwheel show $(WHEEL_DIR)/sluice-*manylinux*.whl

# The wheel installed into a fresh venv (numpy from PyPI) and README.md's Python quick start run from it in a mount
# namespace where the libraries the wheel carries, libpq and MPI are hidden from the loader (tests/wheel/).
test-wheel: wheel
	bash tests/wheel/test_wheel.sh $(WHEEL_DIR) $(BUILD)/wheel-test $(PYTHON) python/wheel-requirements.txt

# The translation of torchvision.transforms.v2 chains and torchvision.io image folders (issue 39) against the real
# torch 2 / torchvision 0.29 (Debian's 0.14 has no v2): a venv of their own under $(BUILD), pinned in
# tests/python/torch2-requirements.txt and made again when the pins change (about 50 s from the local wheels here);
# the package goes into it each run, as in test-python.
TORCH2_VENV := $(BUILD)/torch2-venv
$(TORCH2_VENV)/.installed: tests/python/torch2-requirements.txt
	rm -rf $(TORCH2_VENV) && $(PYTHON) -m venv $(TORCH2_VENV)
	$(TORCH2_VENV)/bin/python -m pip install -q -r $<
	touch $@

test-python-torch2: build $(TORCH2_VENV)/.installed
	SLUICE_BUILD_DIR=$(abspath $(BUILD)) $(TORCH2_VENV)/bin/python -m pip install -q --no-build-isolation --no-deps ./python
	cd tests/python && SLUICE_BUILD_DIR=$(abspath $(BUILD)) SLUICE_CLI=$(abspath $(BUILD))/sluice SLUICE_TORCH2_REQUIRED=1 \
	  $(abspath $(TORCH2_VENV))/bin/python -m pytest -q -rs -p no:cacheprovider test_torch_v2.py test_torchvision_exact.py \
	  test_state.py::test_torchdata_stateful_dataloader

# ---- A real TFX pipeline (issue 51; tests/tfx/, docs/provenance.md "A real TFX store"). NOT part of `make test`:
# the venv is made once (3.2 GB under $(BUILD)/tfx-venv; 3 minutes on a quiet machine, 8 min 40 s beside other
# builds), then the 8 runs and the checks take 25-28 minutes on 2 shared cores (an estimated 12 on quiet ones).
# tfx 1.16.0 is the newest TFX that installs on Debian 12 (glibc 2.36), and it needs Python 3.9 or 3.10, which
# Debian 12 does not ship: TFX_PYTHON names one (found under pyenv's versions, else as
# python3.10 on PATH). tests/tfx/constraints.txt pins every package; to regenerate it (uv from PyPI, seconds):
#   $(TFX_PYTHON) -m venv /tmp/uv && /tmp/uv/bin/pip install uv && cd tests/tfx && /tmp/uv/bin/uv pip compile \
#     requirements.in --python-version 3.10 --python-platform x86_64-manylinux_2_36 --no-header -o constraints.txt
.PHONY: tfx-venv test-tfx
TFX_PYTHON ?= $(firstword $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/3.10.*/bin/python3.10) \
  $(shell command -v python3.10 2>/dev/null))
TFX_VENV := $(BUILD)/tfx-venv
TFX_ROOT := $(BUILD)/tfx-run
tfx-venv: $(TFX_VENV)/.installed
$(TFX_VENV)/.installed: tests/tfx/constraints.txt
	@if [ -z "$(TFX_PYTHON)" ] || ! "$(TFX_PYTHON)" -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null; then \
	  echo "tfx-venv: no Python 3.10 found (TFX_PYTHON='$(TFX_PYTHON)'). tfx 1.16.0, the newest TFX that installs on" >&2; \
	  echo "  Debian 12, needs Python 3.9 or 3.10 and Debian 12 ships 3.11. Install one (pyenv install 3.10.13," >&2; \
	  echo "  or uv python install 3.10) and run: make test-tfx TFX_PYTHON=/path/to/python3.10" >&2; exit 1; fi
	rm -rf $(TFX_VENV) && $(TFX_PYTHON) -m venv $(TFX_VENV)
	$(TFX_VENV)/bin/python -m pip install -q --prefer-binary tfx==1.16.0 -c tests/tfx/constraints.txt
	touch $@

# The runs (tests/tfx/run_tfx.py), then sluice's analytics checked against ml-metadata's own queries
# (tests/tfx/check.py), then each planted misreading, which the check must reject.
TFX_PLANTS := cached-push spans waste overlap graphlet cost-basis gate
test-tfx: deps
	$(MAKE) build tfx-venv
	TF_USE_LEGACY_KERAS=1 $(TFX_VENV)/bin/python tests/tfx/run_tfx.py --root $(TFX_ROOT) --sluice $(BUILD)/sluice
	$(TFX_VENV)/bin/python tests/tfx/check.py --root $(TFX_ROOT) --sluice $(BUILD)/sluice
	@for k in $(TFX_PLANTS); do \
	  $(TFX_VENV)/bin/python tests/tfx/check.py --root $(TFX_ROOT) --sluice $(BUILD)/sluice --plant $$k >$(TFX_ROOT)/plant-$$k.log 2>&1; \
	  rc=$$?; if [ $$rc -ne 1 ]; then echo "test-tfx: planted '$$k' was not caught (exit $$rc; $(TFX_ROOT)/plant-$$k.log)" >&2; exit 1; fi; \
	  echo "test-tfx: planted '$$k' caught: $$(grep -m1 FAIL $(TFX_ROOT)/plant-$$k.log)"; done
	$(BUILD)/sluice prov stats $(TFX_ROOT)/metadata.sqlite
	$(BUILD)/sluice prov report $(TFX_ROOT)/metadata.sqlite -o $(TFX_ROOT)/report.html
	@echo "make test-tfx: the TFX runs' store agrees with ml-metadata's queries; every planted misreading was caught"

# stoker: the two commands a newcomer needs are `make demo` and `make test`.
BUILD ?= build
DATA ?= data/sample
PYTHON := /usr/bin/python3
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build data docs demo bench bench-speed bench-augment bench-segdet bench-pack bench-doctor bench-remote bench-scale bench-volumes bench-drop-in bench-formats bench-node-cache soak test test-cpp test-python check-asan check-tsan check-thread-safety check-wheel wheel fuzz fuzz-smoke clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSTOKER_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)

$(DATA)/.stoker-sample-complete:
	$(PYTHON) scripts/make_sample_dataset.py --out $(DATA)

data: deps
	@$(MAKE) --no-print-directory $(DATA)/.stoker-sample-complete

# The same crops encoded as q90 4:2:0 (the common camera/web encoding).
DATA_Q90 ?= $(DATA)-q90-420
$(DATA_Q90)/.stoker-sample-complete:
	$(PYTHON) scripts/make_sample_dataset.py --out $(DATA_Q90) --quality 90 --subsampling 420

# The main job: stoker against torch's DataLoader, with the decode ceiling.
demo: build data bench

bench:
	$(PYTHON) bench/loader_bench.py $(DATA) --build $(BUILD)

# Issue 4's table: every cache mode, 1 and all threads, both encodings.
bench-speed: build data
	@$(MAKE) --no-print-directory $(DATA_Q90)/.stoker-sample-complete
	$(PYTHON) bench/loader_bench.py $(DATA) $(DATA_Q90) --full --rounds 3 --build $(BUILD)

test: build test-cpp test-python

# The docs site (docs/: Sphinx + MyST + autodoc + breathe/Doxygen, Debian's packages) -> build/docs/html,
# warnings as errors; then a check that no page loads anything from the network. It imports the built
# extension (autodoc) and runs the built CLI's --help (the CLI reference).
DOCS_OUT ?= $(BUILD)/docs
docs: build
	rm -rf $(DOCS_OUT)/html $(DOCS_OUT)/doctrees
	STOKER_BUILD=$(abspath $(BUILD)) STOKER_DOXYGEN_OUT=$(abspath $(DOCS_OUT))/doxygen PYTHONPATH=python \
	  $(PYTHON) -m sphinx -W --keep-going -q -b html -d $(DOCS_OUT)/doctrees docs $(DOCS_OUT)/html
	$(PYTHON) scripts/check_docs_html.py $(DOCS_OUT)/html

test-cpp:
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-python:
	STOKER_BUILD=$(abspath $(BUILD)) PYTHONPATH=python $(PYTHON) -m pytest -q tests/python

# A wheel that stands alone (libjpeg-turbo, libpng, zlib, libtiff, libwebp,
# giflib linked in, built PIC from Debian's source packages into build-deps/)
# in dist/.
wheel: deps
	scripts/build_static_deps.sh build-deps
	rm -rf dist build-wheel/lib.*  # the staged package; build-wheel/temp.*/cmake stays for an incremental build
	STOKER_STATIC_DEPS=$(abspath build-deps) JOBS=$(JOBS) $(PYTHON) -m pip wheel . --no-build-isolation --no-deps -w dist

# The wheel installed into fresh venvs and used from outside the checkout.
check-wheel: wheel
	scripts/wheel_test.sh dist/stoker-*.whl

clean:
	rm -rf $(BUILD) build-wheel dist python/stoker/_stoker*.so python/stoker/_bin

# Sanitizer builds: the C++ suite, then the Python tests that drive the
# threads, with the sanitizer runtime preloaded into Debian's python.
SAN_PYTESTS = tests/python/test_loader.py tests/python/test_shards.py tests/python/test_resume.py \
  tests/python/test_shutdown.py tests/python/test_transforms.py tests/python/test_decode.py tests/python/test_fields.py \
  tests/python/test_detection.py tests/python/test_views.py tests/python/test_volumes.py tests/python/test_drop_in.py
check-asan: deps build
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSTOKER_SANITIZE=address,undefined -DSTOKER_BUILD_PYTHON=ON \
	  -DSTOKER_BUILD_EXAMPLES=OFF -DSTOKER_BUILD_BENCH=OFF
	cmake --build build-asan -j$(JOBS)
	cd build-asan && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --output-on-failure -j$(JOBS)
	ASAN_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)" ASAN_OPTIONS=detect_leaks=0 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 STOKER_PYTHONPATH=build-asan/python \
	  STOKER_BUILD=$(abspath $(BUILD)) scripts/san_pytest.sh $(PYTHON) -m pytest -v -p no:cacheprovider $(SAN_PYTESTS)

check-tsan: deps build
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DSTOKER_SANITIZE=thread -DSTOKER_BUILD_PYTHON=ON \
	  -DSTOKER_BUILD_EXAMPLES=OFF -DSTOKER_BUILD_BENCH=OFF
	cmake --build build-tsan -j$(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j$(JOBS)
	TSAN_PRELOAD="$$(gcc -print-file-name=libtsan.so) $$(gcc -print-file-name=libstdc++.so)" \
	  TSAN_OPTIONS="halt_on_error=1 suppressions=$(abspath scripts/tsan-python.supp)" \
	  STOKER_PYTHONPATH=build-tsan/python STOKER_BUILD=$(abspath $(BUILD)) \
	  sh -c 'for f in tests/python/test_loader.py tests/python/test_resume.py; do \
	    scripts/tsan_pytest.sh $(PYTHON) -m pytest -q -p no:cacheprovider $$f || exit 1; done' 

# Lock contracts (src/util/thread_annotations.h): the core and the packer built by clang with -Wthread-safety as errors.
check-thread-safety: deps
	CC=clang CXX=clang++ cmake -S . -B build-tsa -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS='-Wthread-safety -Werror' \
	  -DSTOKER_BUILD_TESTS=OFF -DSTOKER_BUILD_PYTHON=OFF -DSTOKER_BUILD_EXAMPLES=OFF -DSTOKER_BUILD_BENCH=OFF
	cmake --build build-tsa -j$(JOBS) --target stoker_core stoker_pack

# libFuzzer targets (clang): every fuzz/<name>_fuzz.cc (fuzz/CMakeLists.txt builds the same list), each
# run on its seeds (scripts/make_fuzz_corpus.py, $(FUZZ_BUILD)/corpus/<name>) and what earlier runs found
# ($(FUZZ_BUILD)/found/<name>: new inputs, and crash-*/leak-*/oom-*/timeout-* files, the findings), with
# fuzz/<name>.dict when there is one. Every target runs even after one fails; the command fails if any
# did. UBSan's reports count as findings. FUZZ_BUILD: the build folder (default build-fuzz).
FUZZ_TARGETS := $(patsubst fuzz/%_fuzz.cc,%,$(sort $(wildcard fuzz/*_fuzz.cc)))
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 20
FUZZ_FLAGS ?= -rss_limit_mb=2048 -timeout=25
define fuzz_run
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKER_BUILD_FUZZ=ON \
	  -DSTOKER_BUILD_TESTS=OFF -DSTOKER_BUILD_PYTHON=OFF -DSTOKER_BUILD_EXAMPLES=OFF -DSTOKER_BUILD_BENCH=OFF
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target $(addsuffix _fuzz,$(FUZZ_TARGETS))
	PYTHONPATH=python $(PYTHON) scripts/make_fuzz_corpus.py $(FUZZ_BUILD)/corpus
	@failed=""; for t in $(FUZZ_TARGETS); do mkdir -p $(FUZZ_BUILD)/found/$$t; echo "== $${t}_fuzz: $(1) s"; \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $(FUZZ_BUILD)/fuzz/$${t}_fuzz -max_total_time=$(1) \
	    -print_final_stats=1 $(FUZZ_FLAGS) $$([ -f fuzz/$$t.dict ] && echo -dict=fuzz/$$t.dict) \
	    -artifact_prefix=$(FUZZ_BUILD)/found/$$t/ \
	    $(FUZZ_BUILD)/found/$$t $(FUZZ_BUILD)/corpus/$$t || failed="$$failed $$t"; done; \
	if [ -n "$$failed" ]; then echo "fuzz: findings in:$$failed (inputs under $(FUZZ_BUILD)/found/<target>/)"; exit 1; fi; \
	echo "fuzz: no findings in $(words $(FUZZ_TARGETS)) targets ($(FUZZ_TARGETS))"
endef
fuzz: deps build
	$(call fuzz_run,$(FUZZ_SECONDS))

# CI's pass: every target for FUZZ_SMOKE_SECONDS on its corpus.
fuzz-smoke: deps build
	$(call fuzz_run,$(FUZZ_SMOKE_SECONDS))

# Is the doctor right? The known-truth scenarios of bench/doctor_scenarios/ (storage, decode, transforms, collate,
# host-to-device copy, the model step, a between-epochs evaluation) under the doctor: each verdict against the
# truth, each predicted suggestion applied and measured by the script's own clock (median of 3). ~10 min on 2 cores.
DOCTOR_DATA ?= /tmp/stoker-doctor-scenarios
bench-doctor: build
	$(PYTHON) bench/doctor_bench.py --build $(BUILD) --data $(DOCTOR_DATA)

# What offline preparation buys (issue: pack).
# The augmentation recipes (ImageNet's TrivialAugment + MixUp/CutMix, SimCLR's views) against the DataLoader.
bench-augment: build data
	$(PYTHON) bench/augment_bench.py $(DATA) --rounds 3

bench-segdet: build data
	$(PYTHON) bench/seg_det_bench.py --rounds 3

bench-pack: build data
	$(PYTHON) bench/pack_bench.py $(DATA) --build $(BUILD)

# Remote shards (issue: data that lives elsewhere): the same shards over loopback HTTP (nginx behind the
# fault proxy, 20 ms per request) against local disk, 2 threads; bytes per epoch; cache_dir's second epoch.
bench-remote: build data
	$(PYTHON) bench/remote_bench.py $(DATA) --rounds 3 --build $(BUILD)

# Scale (issue 39): synthetic manifests of 10^6..10^9 records over 10^3..10^5 shards (symlinks to a few real
# shards), ranks 0 of worlds 1/8/1000: construction, first batch, per-rank RSS (and requests with --remote).
bench-scale: build
	$(PYTHON) bench/scale_bench.py --build $(BUILD)

# 3D volumes (issue 16): CT-like phantoms as .npy and .nii.gz (bench/volume_data.py, made in VOLUMES first), 4 patches
# of 96^3 per volume by RandCropByPosNegLabel + ScaleIntensityRange + 3 RandFlips, against a DataLoader over numpy/nibabel.
VOLUMES ?= data/volumes
bench-volumes: build
	$(PYTHON) bench/volume_bench.py $(VOLUMES) --volumes 24 --rounds 3

# Drop-in (issue 33): the torchvision example unmodified vs its two-line port vs native stoker.Loader, also with a Python transform.
bench-drop-in: build data
	$(PYTHON) bench/drop_in_bench.py $(DATA) --rounds 3

# Other formats (issue 40): the sample set's crops as lossy WebP and as 16-bit RGB tiled TIFFs of 2048x2048 (tiles of
# 256, Deflate), stoker against a DataLoader (persistent workers) + PIL, RandomResizedCrop(224), same-round ratios.
DATA_WEBP ?= $(DATA)-webp
DATA_TIFF16 ?= $(DATA)-tiff16
$(DATA_WEBP)/.stoker-sample-complete:
	$(PYTHON) scripts/make_sample_dataset.py --out $(DATA_WEBP) --format webp --quality 90
$(DATA_TIFF16)/.stoker-sample-complete:
	$(PYTHON) scripts/make_sample_dataset.py --out $(DATA_TIFF16) --format tiff16 --size 2048 --tile 256 --per-class 10
bench-formats: build
	@$(MAKE) --no-print-directory $(DATA_WEBP)/.stoker-sample-complete $(DATA_TIFF16)/.stoker-sample-complete
	$(PYTHON) bench/formats_bench.py $(DATA_WEBP) $(DATA_TIFF16) --rounds 3

# One cache per node (issue 36): 4 ranks (gloo, spawned) with cache="ram" and "decoded", share_cache off and on, and
# mmap; the node's PSS (sum of the ranks' smaps_rollup Pss) and images/s per rank, same run.
bench-node-cache: build data
	$(PYTHON) bench/node_cache_bench.py $(DATA) --ranks 4

# Many epochs: batch buffers within their bound, RSS within buffers + slack, fds and threads constant (not part of `make test`).
soak: build data
	$(PYTHON) bench/soak.py $(DATA) --build $(BUILD)

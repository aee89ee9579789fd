# gpuorch: the commands people type. CMake + Ninja do the building.
#   make          release build in build/
#   make test     the release build, then ASan+UBSan in build-test/, every test through ctest
#                 (the fuzz build too: its fuzz_* tests replay the corpora and fuzz briefly),
#                 then ThreadSanitizer in build-tsan/ on the threaded tests (tests/tsan)
#   make fuzz     the libFuzzer targets (clang) in build-fuzz/, each run FUZZ_SECONDS (60);
#                 FUZZ_TARGETS="jobs csv" runs only those (docs/fuzzing.md)
#   make run      the main job: a server and two agents (simulated GPUs) on the demo cluster
#   make bench    benchmarks, results into bench/RESULTS.md
#   make deps     install missing Debian packages (apt-get update first); test-deps adds
#                 what the browser tests need

BUILD      ?= build
TEST_BUILD ?= build-test
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
DEB_PACKAGES = cmake ninja-build gcc pkg-config libjansson-dev libfyaml-dev libcmocka-dev \
               libmicrohttpd-dev libsqlite3-dev libpq-dev libcurl4-openssl-dev libsodium-dev \
               clang-format python3 curl
# what only the tests need: the portal's browser tests, the Kubernetes tests' etcd and
# openssl (tools/k8s-control-plane.sh installs the rest of what it builds with), and
# clang with its runtimes (libFuzzer, the sanitizers) for the fuzz targets, and the
# PostgreSQL server the store's tests start a throwaway instance of
DEB_TEST_PACKAGES = chromium nodejs npm etcd-server openssl clang libclang-rt-dev postgresql-15
FUZZ_PACKAGES = clang libclang-rt-dev
# what only the benchmarks need: callgrind counts the scheduling cycle's instructions
BENCH_PACKAGES = valgrind

.PHONY: all deps test-deps build kube-control-plane fuzz-build fuzz test run bench format \
        format-check clean

all: build

deps:
	@./tools/install-deps.sh $(DEB_PACKAGES)

test-deps:
	@./tools/install-deps.sh $(DEB_PACKAGES) $(DEB_TEST_PACKAGES)

build:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUORCH_TESTS=OFF >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The libFuzzer targets (tests/fuzz): clang, every library instrumented, ASan+UBSan.
fuzz-build:
	@cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
	       -DGPUORCH_FUZZ=ON -DGPUORCH_TESTS=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers

fuzz:
	@./tools/install-deps.sh $(DEB_PACKAGES) $(FUZZ_PACKAGES)
	@$(MAKE) --no-print-directory fuzz-build
	@./tests/fuzz/run.sh fuzz $(FUZZ_BUILD)/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The browser tests' npm packages (playwright-core), from the lock file; again when it changes.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

# The Kubernetes tests' control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler), built once per machine from Debian's source package and cached in
# ~/.cache/gpuorch: about ten minutes the first time, nothing after.
kube-control-plane:
	@./tools/k8s-control-plane.sh >/dev/null

# The release build too: the optimiser finds warnings (-Werror) the debug build does not,
# and `make run` uses it.
test: test-deps node_modules/.package-lock.json build fuzz-build kube-control-plane
	@cmake -S . -B $(TEST_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUORCH_SANITIZE=ON \
	       -DGPUORCH_FUZZ_BUILD=$(abspath $(FUZZ_BUILD)) >/dev/null
	@cmake --build $(TEST_BUILD) -j $(JOBS)
	@cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUORCH_TSAN=ON >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS)
	@cd $(TEST_BUILD) && ctest --output-on-failure -j $(JOBS)
	@cd $(TSAN_BUILD) && ctest --output-on-failure -j $(JOBS)

run: deps build
	./tools/run-local.sh $(BUILD)

bench: deps build kube-control-plane
	@./tools/install-deps.sh $(BENCH_PACKAGES)
	./bench/run.sh $(BUILD)

format:
	clang-format -i $$(find src tests tools bench -name '*.[ch]')

format-check:
	./tests/check_format.sh clang-format .

clean:
	rm -rf $(BUILD) $(TEST_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)

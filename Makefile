# kube-proxy-nft: the one entry point. `make` builds, `make test` proves, `make demo` shows.
CXX      ?= g++
CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -Wall -Wextra -Wno-unused-parameter -MMD -MP
CPPFLAGS += -I.
# cpprest needs -lssl -lcrypto spelled out (its TLS code is inlined into our objects).
# The libnftnl interposers of nft/kernel/typeof_guard.cc and nft/kernel/cache_scope.cc must be in the dynamic
# symbol table for libnftables to call them.
LDFLAGS  += -Wl,--export-dynamic-symbol=nftnl_set_get_data -Wl,--export-dynamic-symbol='nftnl_*_nlmsg_parse'
LDLIBS   += -lnftables -lglog -lgflags -lyaml-cpp -lcpprest -lssl -lcrypto -lprometheus-cpp-core -lnetfilter_conntrack -pthread

BUILD    := build
# SANITIZE=1 (with its own BUILD dir, see `unit-asan`): AddressSanitizer + UndefinedBehaviorSanitizer.
# Without pointer-overflow: Debian's RapidJSON 1.1.0 adds to a null pointer on every parse
# (internal/stack.h, an empty stack before its first growth), harmless, fixed upstream since.
SANITIZERS := -fsanitize=address,undefined -fno-sanitize=pointer-overflow -fno-sanitize-recover=undefined
# -g1: line tables only, enough for the sanitizers' file:line reports, and cheaper to compile and
# link than full debug information (CI builds every file twice).
ifeq ($(SANITIZE),1)
CXXFLAGS += -O1 -g1 -fno-omit-frame-pointer $(SANITIZERS)
LDFLAGS  += -fsanitize=address,undefined
else ifneq ($(filter x86_64 amd64,$(shell uname -m)),)
# RapidJSON's SSE2 paths (whitespace and string scans), part of every x86-64 CPU; for all
# translation units alike, since its templates are instantiated in several. Not under the
# sanitizers: the string scan loads whole aligned 16-byte blocks, which may reach past the end of
# the text (never past its page; the bytes after the closing quote are not used), and
# AddressSanitizer reports each such load. The sanitized unit tests run the scalar scans.
CPPFLAGS += -DRAPIDJSON_SSE2
endif
# Debian's interpreter: python3-pytest installs into it (a pyenv python3 may shadow it on PATH).
PYTHON   := /usr/bin/python3
NPROC    := $(shell nproc)
LIB_SRCS := $(sort $(wildcard nft/*.cc nft/*/*.cc pkg/*/*.cc))
LIB_OBJS := $(LIB_SRCS:%.cc=$(BUILD)/obj/%.o)
UNIT_SRCS := $(sort $(wildcard unit/*.cc))
UNIT_OBJS := $(UNIT_SRCS:%.cc=$(BUILD)/obj/%.o)
CMD_SRCS := $(sort $(wildcard cmd/kube-proxy-nft/*.cc))
CMD_OBJS := $(CMD_SRCS:%.cc=$(BUILD)/obj/%.o)
BIN      := $(BUILD)/kube-proxy-nft
UNIT_BIN := $(BUILD)/unit-tests
# e2e helper: writes other agents' nftables objects straight through libnftnl.
FOREIGN_TABLES := $(BUILD)/foreign-tables

# Debian packages the build, the tests and the demo need.
APT_PKGS := g++ make pkg-config nftables libnftables-dev rapidjson-dev libgoogle-glog-dev \
            libgflags-dev doctest-dev libyaml-cpp-dev libcpprest-dev libboost-dev libssl-dev openssl iproute2 conntrack \
            python3 python3-pytest python3-yaml procps systemd prometheus-cpp-dev prometheus iptables libnftnl-dev libmnl-dev clang \
            libnetfilter-conntrack-dev tini podman runc debootstrap

# libFuzzer targets (unit/fuzz/*.cc), built with Debian's clang with ASan + UBSan. `make fuzz`
# runs each for FUZZ_SECONDS from a seed corpus taken from the tests (unit/fuzz/seeds.py); the
# corpora grow in build/fuzz/corpus/. Crashes are written to build/fuzz/crash-*. A campaign:
# `make fuzz FUZZ_RUNS=10000000 FUZZ_TARGETS="kubeconfig watch_stream"` (that many inputs each,
# no time bound; docs/reliability.md has the rates). ASan keeps no allocation stacks (15% of a
# run's time): a crash input is re-run with them.
FUZZ_CXX     ?= clang++
FUZZ_SECONDS ?= 60
FUZZ_RUNS    ?=
FUZZ_BOUND    = $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS),-max_total_time=$(FUZZ_SECONDS))
# FUZZ_FORK=N: libFuzzer's fork mode, N jobs (cores) for one target; -runs counts them all.
FUZZ_FORK    ?=
FUZZ_BUILD   := build/fuzz
FUZZ_FLAGS   := -std=c++17 -O1 -g -fno-omit-frame-pointer $(SANITIZERS)
# What the targets link against: everything but the HTTP stacks (they pull in cpprest and Beast)
# and the localhost NodePort listeners (Asio).
FUZZ_LIB_SRCS := $(filter-out pkg/kube/cpprest_transport.cc pkg/http/server.cc pkg/health/% pkg/localhost/%,$(LIB_SRCS))
FUZZ_LIB_OBJS := $(FUZZ_LIB_SRCS:%.cc=$(FUZZ_BUILD)/obj/%.o)
FUZZ_TARGETS  := $(patsubst unit/fuzz/%.cc,%,$(wildcard unit/fuzz/*.cc))

.PHONY: all deps test unit unit-asan e2e chaos demo bench bench-conntrack bench-http bench-lc fuzz image image-test clean
all: $(BIN)

# Idempotent: installs only what is missing, so repeated calls cost a dpkg query.
deps:
	@missing=""; for p in $(APT_PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

$(BUILD)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(BUILD)/libkpn.a: $(LIB_OBJS)
	@rm -f $@; ar rcs $@ $^

# --version: the release and the commit built from. version.o is rebuilt when the commit changes
# (the stamp file's content is rewritten only then).
VERSION    := 0.1.0
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
$(BUILD)/commit-stamp: FORCE
	@mkdir -p $(BUILD); echo '$(VERSION) $(GIT_COMMIT)' | cmp -s - $@ || echo '$(VERSION) $(GIT_COMMIT)' > $@
$(BUILD)/obj/pkg/config/version.o: $(BUILD)/commit-stamp
$(BUILD)/obj/pkg/config/version.o: CPPFLAGS += -DKPN_VERSION='"$(VERSION)"' -DKPN_GIT_COMMIT='"$(GIT_COMMIT)"'
.PHONY: FORCE
FORCE:

$(BIN): $(CMD_OBJS) $(BUILD)/libkpn.a
	$(CXX) $(CXXFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(UNIT_BIN): $(UNIT_OBJS) $(BUILD)/libkpn.a
	$(CXX) $(CXXFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(FUZZ_BUILD)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/libkpn.a: $(FUZZ_LIB_OBJS)
	@rm -f $@; ar rcs $@ $^

$(FUZZ_BUILD)/%: unit/fuzz/%.cc $(FUZZ_BUILD)/libkpn.a
	$(FUZZ_CXX) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

fuzz: SHELL := /bin/bash
fuzz: deps $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/%)
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; $(PYTHON) unit/fuzz/seeds.py $$t $(FUZZ_BUILD)/corpus/$$t; \
	  GLOG_minloglevel=3 ASAN_OPTIONS=malloc_context_size=0 \
	  $(FUZZ_BUILD)/$$t $(FUZZ_BOUND) $(if $(FUZZ_FORK),-fork=$(FUZZ_FORK)) -max_len=4096 -timeout=60 -rss_limit_mb=2048 \
	    -artifact_prefix=$(FUZZ_BUILD)/crash-$$t- -print_final_stats=1 $(FUZZ_BUILD)/corpus/$$t 2>&1 | \
	    grep -E "^#[0-9]+ +DONE|stat::number_of_executed_units|ERROR|SUMMARY|Done [0-9]+ runs|fuzzed for|INFO: exiting" ; \
	  test $${PIPESTATUS[0]} -eq 0 || { echo "fuzz $$t: FAILED (see $(FUZZ_BUILD)/crash-$$t-*)"; exit 1; }; \
	done

$(FOREIGN_TABLES): e2e/foreign_tables.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -o $@ $< -lnftnl -lmnl

unit: deps $(UNIT_BIN)
	$(UNIT_BIN)

# The unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer), in their
# own build dir. `make test` runs them this way.
ASAN_BUILD := build/asan
ASAN_ENV   := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
unit-asan: deps
	$(MAKE) --no-print-directory -j$(NPROC) BUILD=$(ASAN_BUILD) SANITIZE=1 $(ASAN_BUILD)/unit-tests
	$(ASAN_ENV) $(ASAN_BUILD)/unit-tests

e2e: deps $(BIN) $(FOREIGN_TABLES) image
	$(PYTHON) -m pytest -p no:cacheprovider -v e2e

# The README's test command, and CI's. Packages first, then the daemon; then, side by side, the
# sanitized unit tests (built in parallel, run under ASan + UBSan + LSan, no root) and the image
# (mostly debootstrap's downloads and unpacking; e2e/test_86_image.py runs it under podman); then
# the real-kernel scenarios; pytest's summary line ends the run.
test: deps
	$(MAKE) --no-print-directory -j$(NPROC) $(BIN) $(FOREIGN_TABLES)
	$(MAKE) --no-print-directory -j2 unit-asan image
	$(PYTHON) -m pytest -p no:cacheprovider -v e2e

# For bench/libnftables_cache_cost.py: the cache-scope interposers as an LD_PRELOAD library.
$(BUILD)/cache-scope-preload.so: bench/cache_scope_preload.cc nft/kernel/cache_scope.cc nft/kernel/typeof_guard.cc
	$(CXX) $(CPPFLAGS) -std=c++17 -O2 -fPIC -shared -o $@ $^ -ldl

# Minutes of chaos in namespaces (e2e/chaos_scenarios.py); not part of `make test`.
chaos: deps $(BIN) $(FOREIGN_TABLES)
	KPN_TEST_TIME_LIMIT=3600 $(PYTHON) -m pytest -p no:cacheprovider -v -s e2e/chaos_scenarios.py

demo: deps $(BIN)
	bash examples/demo.sh

# The UDP conntrack reconciler against a real conntrack table in a namespace of its own
# (bench/conntrack_bench.cc): 10k UDP services, 100k UDP entries (10k stale), 50k TCP entries.
$(BUILD)/conntrack-bench: bench/conntrack_bench.cc $(BUILD)/libkpn.a
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench-conntrack: deps $(BIN) $(BUILD)/conntrack-bench
	unshare -n $(BUILD)/conntrack-bench --services 10000 --entries 100000 --stale 10000 --tcp 50000
	$(PYTHON) bench/conntrack_daemon_bench.py --binary $(BIN)

# BASELINE=path/to/an/older/kube-proxy-nft adds that binary's ClusterIP numbers to the same run.
bench: deps $(BIN)
	$(PYTHON) bench/run_bench.py $(if $(BASELINE),--baseline-binary=$(BASELINE)) $(if $(BENCH_SIZES),--sizes=$(BENCH_SIZES))
	$(MAKE) --no-print-directory bench-conntrack
	$(MAKE) --no-print-directory bench-http
	$(MAKE) --no-print-directory bench-lc

# Least connection at 10k x 10, a tenth of the services lc, under steady real TCP connections:
# the daemon's CPU per 1 000 new connections/s, the decision-to-kernel latency, RSS, bursts
# (bench/lc_bench.py; root, ~3 min).
bench-lc: deps $(BIN)
	$(PYTHON) bench/lc_bench.py --binary $(BIN)

# The health/metrics HTTP server's throughput, threads and fds: a measurement kept among the unit
# tests (it shares their HTTP client) and skipped there, so it runs here. Then the daemon's ports
# under hostile clients holding 10 000 connections while probes must get through
# (bench/http_abuse_bench.py; root, ~5 min; BASELINE=path adds an older binary's figures).
bench-http: deps $(UNIT_BIN) $(BIN)
	$(UNIT_BIN) --no-skip -tc='http server: measure*'
	$(PYTHON) bench/http_abuse_bench.py --binary $(BIN) $(if $(BASELINE),--baseline-binary=$(BASELINE))

# The container image from deploy/Dockerfile with Debian's podman (no Docker engine needed): the
# binary `make` built here in the runtime stage (no compile in the image), then a check that it
# starts. The Debian base is built from the package mirror with debootstrap, once (this machine
# kind reaches no registry); KPN_IMAGE_BASE=pull takes debian:bookworm-slim from a registry.
# `make image-test` runs the image as kubeadm's DaemonSet would, with traffic (e2e/test_86_image.py).
IMAGE ?= kube-proxy-nft:latest
export KPN_IMAGE_BASE ?= debootstrap
image: deps $(BIN)
	deploy/build-image.sh $(IMAGE) $(BIN)

image-test: image
	KPN_IMAGE=$(IMAGE) $(PYTHON) -m pytest -p no:cacheprovider -v e2e/test_86_image.py

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)

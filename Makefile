# kube-proxy-nft: the one entry point. `make` builds, `make test` proves, `make demo` shows.
CXX      ?= g++
CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -Wall -Wextra -Wno-unused-parameter -MMD -MP
CPPFLAGS += -I.
# cpprest needs -lssl -lcrypto spelled out (its TLS code is inlined into our objects).
LDLIBS   += -lnftables -lglog -lgflags -lyaml-cpp -lcpprest -lssl -lcrypto -lprometheus-cpp-core -pthread

BUILD    := build
# Debian's interpreter: python3-pytest installs into it (a pyenv python3 may shadow it on PATH).
PYTHON   := /usr/bin/python3
LIB_SRCS := $(sort $(wildcard nft/*.cc pkg/*/*.cc))
LIB_OBJS := $(LIB_SRCS:%.cc=$(BUILD)/obj/%.o)
UNIT_SRCS := $(sort $(wildcard unit/*.cc))
UNIT_OBJS := $(UNIT_SRCS:%.cc=$(BUILD)/obj/%.o)
CMD_SRCS := $(sort $(wildcard cmd/kube-proxy-nft/*.cc))
CMD_OBJS := $(CMD_SRCS:%.cc=$(BUILD)/obj/%.o)
BIN      := $(BUILD)/kube-proxy-nft
UNIT_BIN := $(BUILD)/unit-tests

# Debian packages the build, the tests and the demo need.
APT_PKGS := g++ make pkg-config nftables libnftables-dev rapidjson-dev libgoogle-glog-dev \
            libgflags-dev doctest-dev libyaml-cpp-dev libcpprest-dev libboost-dev libssl-dev openssl iproute2 conntrack \
            python3 python3-pytest python3-yaml procps systemd prometheus-cpp-dev prometheus iptables

.PHONY: all deps test unit e2e demo bench image clean
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
	$(CXX) $(CXXFLAGS) -o $@ $^ $(LDLIBS)

$(UNIT_BIN): $(UNIT_OBJS) $(BUILD)/libkpn.a
	$(CXX) $(CXXFLAGS) -o $@ $^ $(LDLIBS)

unit: deps $(UNIT_BIN)
	$(UNIT_BIN)

e2e: deps $(BIN)
	$(PYTHON) -m pytest -p no:cacheprovider -v e2e

# Unit tests first (no root), then the real-kernel scenarios; pytest's summary line ends the run.
test: deps $(BIN) $(UNIT_BIN)
	$(UNIT_BIN)
	$(PYTHON) -m pytest -p no:cacheprovider -v e2e

demo: deps $(BIN)
	bash examples/demo.sh

# BASELINE=path/to/an/older/kube-proxy-nft adds that binary's ClusterIP numbers to the same run.
bench: deps $(BIN)
	$(PYTHON) bench/run_bench.py $(if $(BASELINE),--baseline-binary=$(BASELINE))

# The container image from deploy/Dockerfile with Debian's podman (no Docker engine needed), then a
# check that it starts the binary. KPN_IMAGE_BASE=debootstrap: no registry reachable, the Debian
# base is built from the package mirror (deploy/build-image.sh).
IMAGE ?= kube-proxy-nft:latest
IMAGE_PKGS := podman runc debootstrap
image:
	@$(MAKE) --no-print-directory deps APT_PKGS="$(IMAGE_PKGS)"
	deploy/build-image.sh $(IMAGE)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

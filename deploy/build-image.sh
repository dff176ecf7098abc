#!/bin/sh
# make image: builds deploy/Dockerfile with Debian's podman (rootful, no Docker engine needed) and
# checks that the image starts the binary. Usage: deploy/build-image.sh IMAGE [BINARY]
#
# With BINARY (what `make image` passes: build/kube-proxy-nft, built on this bookworm host), the
# `prebuilt` target copies it, stripped of its debug sections, into the runtime stage: no compile
# inside the image. Without it, the image's own `build` stage compiles from the source tree.
#
# Base images: where a registry is reachable podman pulls debian:bookworm(-slim) as usual. Where
# only Debian's package mirror is, KPN_IMAGE_BASE=debootstrap builds a minbase bookworm root file
# system from the mirror (KPN_DEBIAN_MIRROR) and imports it under both names, once.
set -eu
IMAGE=${1:-kube-proxy-nft:latest}
BINARY=${2:-}
BASE=${KPN_IMAGE_BASE:-pull}
MIRROR=${KPN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# PODMAN and ULIMITS: what this machine kind needs, harmless elsewhere (deploy/podman.sh says why).
. "$(dirname "$0")/podman.sh"

if [ "$BASE" = debootstrap ] && ! $PODMAN image exists docker.io/library/debian:bookworm; then
  root=$(mktemp -d /var/tmp/kpn-rootfs.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase bookworm "$root" "$MIRROR"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | $PODMAN import - docker.io/library/debian:bookworm
  $PODMAN tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
fi
pull=missing
[ "$BASE" = debootstrap ] && pull=never
COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ -n "$BINARY" ]; then
  # The build context of `COPY --from=bin`: the binary alone, without its debug sections.
  bin=$(mktemp -d /var/tmp/kpn-image-bin.XXXXXX)
  trap 'rm -rf "$bin" ${root:-}' EXIT
  objcopy --strip-debug "$BINARY" "$bin/kube-proxy-nft"
  target="--target=prebuilt --build-context=bin=$bin"
  context=$bin
else
  target=""
  context=.
fi
# Host network for the build stages' apt-get; build/ and .git stay out of the context.
# shellcheck disable=SC2086
$PODMAN build --pull="$pull" --network=host $ULIMITS --ignorefile deploy/Dockerfile.dockerignore \
  --build-arg GIT_COMMIT="$COMMIT" $target -f deploy/Dockerfile -t "$IMAGE" "$context"
# The image must start the binary and print its name (gflags' --version, exit 0), without network.
# shellcheck disable=SC2086
out=$($PODMAN run --rm --network=none $ULIMITS "$IMAGE" --version 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -q "kube-proxy-nft.*$COMMIT" || { echo "image $IMAGE does not start kube-proxy-nft $COMMIT: $out"; exit 1; }
echo "image $IMAGE built; \`--version\` in it says: $out"

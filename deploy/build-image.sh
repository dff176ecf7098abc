#!/bin/sh
# make image: builds deploy/Dockerfile with Debian's podman (rootful, no Docker engine needed) and
# checks that the image starts the binary. Usage: deploy/build-image.sh IMAGE
#
# Base images: where a registry is reachable podman pulls debian:bookworm(-slim) as usual. Where
# only Debian's package mirror is, KPN_IMAGE_BASE=debootstrap builds a minbase bookworm root file
# system from the mirror (KPN_DEBIAN_MIRROR) and imports it under both names, once.
set -eu
IMAGE=${1:-kube-proxy-nft:latest}
BASE=${KPN_IMAGE_BASE:-pull}
MIRROR=${KPN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What this machine kind needs, harmless elsewhere:
#  - vfs storage: works on any file system (overlay on overlay does not);
#  - runc: crun refuses the hybrid cgroup v1 + v2 layout ("cgroups in hybrid mode not supported");
#  - cgroupfs and file events: no systemd;
#  - ulimits at or below ours: without CAP_SYS_RESOURCE the runtime cannot raise podman's default
#    RLIMIT_NOFILE (1048576) / RLIMIT_NPROC, and the container fails with EPERM from setrlimit.
PODMAN="podman --runtime=runc --storage-driver=vfs --cgroup-manager=cgroupfs --events-backend=file"
NOFILE=$(ulimit -Hn)
ULIMITS="--ulimit nofile=$NOFILE:$NOFILE --ulimit nproc=4096:4096"

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
# Host network for the build stages' apt-get; build/ and .git stay out of the context.
# shellcheck disable=SC2086
$PODMAN build --pull="$pull" --network=host $ULIMITS --ignorefile deploy/Dockerfile.dockerignore \
  -f deploy/Dockerfile -t "$IMAGE" .
# The image must start the binary and print its name (gflags' --version, exit 0), without network.
# shellcheck disable=SC2086
out=$($PODMAN run --rm --network=none $ULIMITS "$IMAGE" --version 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -q kube-proxy-nft || { echo "image $IMAGE does not start kube-proxy-nft: $out"; exit 1; }
echo "image $IMAGE built; \`--version\` in it says: $out"

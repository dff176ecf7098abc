# Sourced by deploy/build-image.sh and e2e/test_86_image.py: the podman command line this machine
# kind needs, harmless elsewhere.
#  - vfs storage: works on any file system (overlay on overlay does not);
#  - runc: crun refuses the hybrid cgroup v1 + v2 layout ("cgroups in hybrid mode not supported");
#  - cgroupfs and file events: no systemd;
#  - ulimits at or below ours: without CAP_SYS_RESOURCE the runtime cannot raise podman's default
#    RLIMIT_NOFILE (1048576) / RLIMIT_NPROC, and the container fails with EPERM from setrlimit.
PODMAN="podman --runtime=runc --storage-driver=vfs --cgroup-manager=cgroupfs --events-backend=file"
NOFILE=$(ulimit -Hn)
ULIMITS="--ulimit nofile=$NOFILE:$NOFILE --ulimit nproc=4096:4096"

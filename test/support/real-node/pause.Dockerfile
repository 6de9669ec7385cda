# The pod sandbox ("pause") image containerd starts for every pod on the real node: a static
# busybox (Debian's busybox-static) that sleeps. containerd stops it with SIGKILL, so it
# needs no signal handling. Built by pause-image.sh; test infrastructure only.
FROM scratch
COPY busybox /bin/busybox
USER 65535:65535
ENTRYPOINT ["/bin/busybox", "sleep", "2147483647"]

#!/bin/sh
# The image's entrypoint: binds the side server and the role's API to this container's own
# address unless they are set, then runs the command (`python -m ROLE`, `streamcrawl ...`).
#
# The services publish the address they listen on in the `members` topic (Prometheus targets,
# CLI and query routing read it there), so it must be one the other containers can reach:
# 0.0.0.0 would listen but publish nothing usable. Kubernetes sets these from the pod IP.
set -eu
address="$(hostname -i 2>/dev/null | cut -d' ' -f1)"
case "$address" in
  "" | 127.* | ::1) address=0.0.0.0 ;;  # no routable address: listen everywhere
esac
: "${STREAMCRAWL_HTTP__HOST:=$address}"
: "${STREAMCRAWL_FRONTIER__API_HOST:=$address}"
: "${STREAMCRAWL_LINKGRAPH__API_HOST:=$address}"
: "${STREAMCRAWL_STORAGE__API_HOST:=$address}"
export STREAMCRAWL_HTTP__HOST STREAMCRAWL_FRONTIER__API_HOST STREAMCRAWL_LINKGRAPH__API_HOST \
  STREAMCRAWL_STORAGE__API_HOST
exec "$@"

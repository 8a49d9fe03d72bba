#!/bin/bash
# `wheelhouse_part.sh N [SET]`: a device call that only carries part N of a transfer (prepare-wheelhouse.sh: set W,
# the default; prepare-sglang.sh: set S) and appends it; the machine must stay warm until the set's last call
# (wheelhouse_roles.sh, sglang_setup.sh): calls back to back, ~30 s idle at most.
set -euo pipefail
set=${2:-W}
tar=/var/tmp/gpulxc-transfer${2:+-$2}.tar
# (ignored paths carried by earlier calls may still be in the tree: take only this call's part, by index)
[[ $1 == 0 ]] && rm -f "$tar"
cat ".cache/gpu$set$1/part" >> "$tar"
ls -l "$tar"

# shellcheck shell=bash
# Shared by lab/setup and lab/teardown (test infrastructure).
LAB_STATE=/var/lib/gpulxc-lab
LAB_LIB=/usr/local/lib/gpulxc-lab
LAB_MANIFEST=$LAB_STATE/manifest
LAB_TEMPLATE_DIR=/var/lib/vz/template/cache
LAB_TEMPLATE=debian-12-gpulxclab_12.0-1_amd64.tar.zst
LAB_SSH_PORT=${GPULXC_LAB_SSH_PORT:-2222}

lab_log() { echo "lab: $*"; }
lab_die() {
  echo "lab: ERROR: $*" >&2
  exit 1
}

lab_refuse_real_proxmox() {
  if [[ -d /usr/share/perl5/PVE ]]; then
    lab_die "this is a real Proxmox VE node (/usr/share/perl5/PVE exists); the lab only runs on a machine without Proxmox"
  fi
}

# Remember what the lab made, so teardown removes exactly that.
lab_record() {
  mkdir -p "$LAB_STATE"
  grep -qxF "$1 $2" "$LAB_MANIFEST" 2>/dev/null || echo "$1 $2" >>"$LAB_MANIFEST"
}

lab_mknod() {
  local path=$1 major=$2 minor=$3
  if [[ -e $path ]]; then
    local have
    have=$(stat -c '%t:%T' "$path")
    if [[ $have == "$(printf '%x:%x' "$major" "$minor")" ]]; then
      lab_record node "$path"
      return 0
    fi
    grep -qxF "node $path" "$LAB_MANIFEST" 2>/dev/null || lab_die "$path exists and is not the lab's"
    rm -f "$path"
  fi
  mknod -m 0666 "$path" c "$major" "$minor"
  lab_record node "$path"
}

# A character major that no driver has registered, from the dynamic range (as nvidia-uvm gets one).
lab_free_char_major() {
  if [[ -e /dev/nvidia-uvm ]] && grep -qxF "node /dev/nvidia-uvm" "$LAB_MANIFEST" 2>/dev/null; then
    echo $((16#$(stat -c '%t' /dev/nvidia-uvm)))
    return
  fi
  local used major
  used=$(awk '/^Character devices:/{c=1;next} /^$/{c=0} c{print $1}' /proc/devices)
  for major in $(seq 511 -1 384) $(seq 254 -1 234); do
    grep -qx "$major" <<<"$used" || {
      echo "$major"
      return
    }
  done
  lab_die "no free character major for the simulated nvidia-uvm"
}

lab_sshd_running() {
  [[ -s $LAB_STATE/ssh/sshd.pid ]] && kill -0 "$(cat "$LAB_STATE/ssh/sshd.pid")" 2>/dev/null
}

# Install a lab stand-in tool (marked gpulxc-lab) where the real one lives; never over a real one.
lab_install_tool() {
  local src=$1 dest=$2
  if [[ -e $dest ]] && ! grep -q 'gpulxc-lab' "$dest"; then
    lab_die "$dest exists and is not the lab's; refusing to replace it"
  fi
  install -m 0755 "$src" "$dest"
  lab_record file "$dest"
}

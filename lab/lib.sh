# shellcheck shell=bash
# Shared by lab/setup and lab/teardown (test infrastructure).
LAB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_STATE=/var/lib/gpulxc-lab
LAB_LIB=/usr/local/lib/gpulxc-lab
LAB_MANIFEST=$LAB_STATE/manifest
LAB_TEMPLATE_DIR=/var/lib/vz/template/cache
LAB_TEMPLATE=debian-12-gpulxclab_12.0-1_amd64.tar.zst
LAB_TEMPLATE_OLD=debian-11-gpulxclab_11.0-1_amd64.tar.zst
LAB_TEMPLATE_JIT=debian-12-gpulxclab-jit_12.0-2_amd64.tar.zst
LAB_SSH_PORT=${GPULXC_LAB_SSH_PORT:-2222}
# The second node's sshd (lab/setup 5b): the same machine, seen as the cluster's other node.
LAB_SSH_PORT2=${GPULXC_LAB_SSH_PORT2:-2223}
LAB_INDEX_PORT=${GPULXC_LAB_INDEX_PORT:-3141}
LAB_INDEX=$LAB_STATE/index
# Real wheels downloaded once for the lab index; kept by `lab/teardown --keep-template` like the template.
LAB_WHEEL_CACHE=/var/cache/gpulxc-lab/wheels

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

# The lab's sshd, by its pid file and its command line: after the machine's processes were killed (a
# session cut off, a reboot) the pid file stays behind and its number may belong to another process.
lab_sshd_running() {
  local pid
  [[ -s $LAB_STATE/ssh/sshd.pid ]] || return 1
  pid=$(cat "$LAB_STATE/ssh/sshd.pid")
  [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$LAB_STATE/ssh/sshd_config"
}

# The lab package index's server (lab/index/serve), by its pid file and command line.
lab_index_running() {
  local pid
  [[ -s $LAB_STATE/index.pid ]] || return 1
  pid=$(cat "$LAB_STATE/index.pid")
  # the server this checkout's setup starts (its throttle file too): one started otherwise is restarted
  [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" |
    grep -qF "serve $LAB_INDEX $LAB_INDEX_PORT $LAB_STATE/index.log $LAB_STATE/index.throttle"
}

# A FUSE mount whose daemon was killed (the pmxcfs stand-in after the machine's processes were
# killed) stays in the mount table and answers every access with ENOTCONN: detach it.
lab_clear_dead_mount() {
  local path=$1
  grep -qF " $path fuse" /proc/self/mounts || return 0
  stat "$path" >/dev/null 2>&1 && return 0
  lab_log "detaching $path (its FUSE daemon is gone)"
  umount -l "$path"
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

# Run a command with no file descriptor above 2 open. The lab's daemons start through this: one that kept an
# inherited descriptor would keep whatever it refers to, e.g. the lock of a caller's `flock <file> lab/setup`,
# held for as long as the daemon lives.
lab_without_inherited_fds() {
  /usr/bin/python3 -c 'import os, sys; os.closerange(3, os.sysconf("SC_OPEN_MAX")); os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

# The pmxcfs stand-in (lab/pmxcfs) on /etc/pve/nodes/<node>, backed by STORE ($LAB_STATE/pmxcfs by default); a
# dead mount left by a killed daemon is replaced, so the CT configs in the backing store come back.
#   lab_mount_pmxcfs NODE [STORE]
lab_mount_pmxcfs() {
  local dir=/etc/pve/nodes/$1 store=${2:-$LAB_STATE/pmxcfs}
  lab_clear_dead_mount "$dir"
  install -d -m 0755 "$dir"
  mountpoint -q "$dir" && return 0
  install -d -m 0755 "$store"
  # configs written before the mount (an older lab) move into the stand-in's backing store
  if [[ -n $(ls -A "$dir") ]]; then
    cp -a "$dir/." "$store/"
    find "$dir" -mindepth 1 -delete
  fi
  lab_without_inherited_fds /usr/bin/python3 "$LAB_HERE/pmxcfs" "$store" "$dir"
}

# The second node's sshd (lab/setup 5b) by its pid file and command line; its pid on stdout.
lab_node2_sshd_pid() {
  local pid
  [[ -s $LAB_STATE/ssh/sshd-node2.pid ]] || return 1
  pid=$(cat "$LAB_STATE/ssh/sshd-node2.pid")
  [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$LAB_STATE/ssh/sshd_config-node2" &&
    echo "$pid"
}

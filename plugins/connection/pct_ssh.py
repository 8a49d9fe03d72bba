# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# The SSH options in DOCUMENTATION are those of ansible-core's ssh connection plugin (same licence,
# their core version_added markers dropped), which this plugin subclasses;
# tests/unit/plugins/connection/test_pct_ssh.py keeps them in step.

from __future__ import annotations

DOCUMENTATION = r"""
    name: pct_ssh
    short_description: Run tasks in Proxmox VE containers through OpenSSH to the node and C(pct exec)
    description:
    - 'Connects to the Proxmox VE node with the OpenSSH client (as P(ansible.builtin.ssh#connection) does:
      ControlPersist, pipelining, the same SSH options) and runs every command in the container with C(pct
      exec <vmid> --).'
    - 'Same job and inventory variables as C(community.proxmox.proxmox_pct_remote) (V(proxmox_vmid), V(proxmox_become_method),
      C(ansible_host) = the node), so switching is one line: C(ansible_connection: gpulxc.sglang.pct_ssh).'
    - Module payloads are piped over the persistent SSH connection (pipelining) instead of being copied first;
      large files move with the SSH file transfer to the node and C(pct push)/C(pct pull) into the container,
      never whole in memory.
    - 'Commands go through one channel per container that stays open between tasks (O(pct_channel)): one
      C(pct exec <vmid> -- python3) kept open over SSH by a small process on the controller, so a command
      costs neither an SSH session on the node nor a C(pct) start. Whatever the channel cannot take (it is
      busy with another command, the container has no C(python3) yet or is stopped, an SSH password, C(become)
      in the container) runs with a plain C(pct exec), as without the channel.'
    author:
    - gpulxc.sglang developers (@gpulxc)
    version_added: 0.1.0
    extends_documentation_fragment:
    - connection_pipelining
    notes:
    - The node must run C(pct) as root (root login, or sudo without a password for C(pct)); the container
      must be running and have C(/bin/sh) and C(cat).
    - The SSH options below are those of P(ansible.builtin.ssh#connection) from ansible-core 2.19, which this
      plugin drives; V(host) is the node.
    options:
      vmid:
        description:
        - ID of the container on the node (C(pct exec <vmid>)).
        type: int
        required: true
        vars:
        - name: proxmox_vmid
      proxmox_become_method:
        description:
        - 'How a non-root O(remote_user) becomes root on the node to run C(pct): C(sudo -n) (no password prompt;
          allow C(/usr/sbin/pct) in sudoers with NOPASSWD).'
        - Only V(sudo) is supported.
        type: str
        default: sudo
        choices:
        - sudo
        vars:
        - name: proxmox_become_method
      pct_executable:
        description:
        - Path of C(pct) on the node.
        type: str
        default: /usr/sbin/pct
        vars:
        - name: proxmox_pct_executable
      pct_channel:
        description:
        - Keep one C(pct exec) per container open between tasks and send the commands through it (see the
          description). The channel is a process on the controller that listens on a socket in
          O(control_path_dir) (mode 0600, as SSH's control sockets), and exits after
          O(pct_channel_persist) seconds without a command or when the container's side is gone.
        - Each open channel holds one session of the SSH connection to the node (sshd's C(MaxSessions), 10 by
          default, counts them, with the sessions of commands run alongside); for more containers per node than
          that in one run, raise C(MaxSessions) on the node or lower O(pct_channel_persist).
          A C(reset_connection) meta task makes the next command start a new channel.
        - V(false) runs every command with its own SSH session and C(pct exec).
        type: bool
        default: true
        vars:
        - name: proxmox_pct_channel
        version_added: 0.2.0
      pct_channel_persist:
        description:
        - Seconds the channel stays open without a command (as SSH's C(ControlPersist)).
        type: int
        default: 60
        vars:
        - name: proxmox_pct_channel_persist
        version_added: 0.2.0
      pct_channel_preload:
        description:
        - Run Ansible modules piped to the container's C(python3) in a child forked from the channel's Python,
          which has imported the standard library and the C(ansible.module_utils) files modules share (from
          the first module's payload; a file is used only while its bytes are those the payload brings). Saves
          the ~0.1 s a fresh Python spends importing them for every module.
        - V(false) starts a fresh C(python3) for every module, as plain C(pct exec) does.
        - The fork relies on private parts of ansible-core's module payload, so it is used only with the
          ansible-core versions this collection is tested with (2.19); with any other, modules start a fresh
          C(python3) whatever this option says. It saves about 5 s of a 18 s no-op C(site.yml) re-run in the
          collection's lab (docs/connection.md).
        type: bool
        default: true
        vars:
        - name: proxmox_pct_channel_preload
        version_added: 0.2.0
      pct_transfer_threshold:
        description:
        - Files up to this many bytes are written into the container with one C(pct exec ... cat) call; larger
          files are copied to the node with the SSH file transfer and moved into the container with C(pct
          push) (and fetched with C(pct pull)), so no file is held in memory.
        type: int
        default: 262144
        vars:
        - name: proxmox_pct_transfer_threshold
      host:
        description: Hostname/IP to connect to.
        default: inventory_hostname
        type: string
        vars:
        - name: inventory_hostname
        - name: ansible_host
        - name: ansible_ssh_host
        - name: delegated_vars['ansible_host']
        - name: delegated_vars['ansible_ssh_host']
      host_key_checking:
        description: Determines if SSH should reject or not a connection after checking host keys.
        default: true
        type: boolean
        ini:
        - section: defaults
          key: host_key_checking
        - section: ssh_connection
          key: host_key_checking
        env:
        - name: ANSIBLE_HOST_KEY_CHECKING
        - name: ANSIBLE_SSH_HOST_KEY_CHECKING
        vars:
        - name: ansible_host_key_checking
        - name: ansible_ssh_host_key_checking
      password:
        description: Authentication password for the O(remote_user). Can be supplied as CLI option.
        type: string
        vars:
        - name: ansible_password
        - name: ansible_ssh_pass
        - name: ansible_ssh_password
      password_mechanism:
        description: Mechanism to use for handling ssh password prompt
        type: string
        default: ssh_askpass
        choices:
        - ssh_askpass
        - sshpass
        - disable
        env:
        - name: ANSIBLE_SSH_PASSWORD_MECHANISM
        ini:
        - key: password_mechanism
          section: ssh_connection
        vars:
        - name: ansible_ssh_password_mechanism
      sshpass_prompt:
        description:
        - Password prompt that C(sshpass)/C(SSH_ASKPASS) should search for.
        - Supported by sshpass 1.06 and up when O(password_mechanism) set to V(sshpass).
        - Defaults to C(Enter PIN for) when pkcs11_provider is set.
        - Defaults to C(assword) when O(password_mechanism) set to V(ssh_askpass).
        default: ''
        type: string
        ini:
        - section: ssh_connection
          key: sshpass_prompt
        env:
        - name: ANSIBLE_SSHPASS_PROMPT
        vars:
        - name: ansible_sshpass_prompt
      ssh_args:
        description: Arguments to pass to all SSH CLI tools.
        default: -C -o ControlMaster=auto -o ControlPersist=60s
        type: string
        ini:
        - section: ssh_connection
          key: ssh_args
        env:
        - name: ANSIBLE_SSH_ARGS
        vars:
        - name: ansible_ssh_args
      ssh_common_args:
        description: Common extra args for all SSH CLI tools.
        type: string
        ini:
        - section: ssh_connection
          key: ssh_common_args
        env:
        - name: ANSIBLE_SSH_COMMON_ARGS
        vars:
        - name: ansible_ssh_common_args
        cli:
        - name: ssh_common_args
        default: ''
      ssh_executable:
        default: ssh
        description:
        - This defines the location of the SSH binary. It defaults to V(ssh) which will use the first SSH
          binary available in $PATH.
        - This option is usually not required, it might be useful when access to system SSH is restricted,
          or when using SSH wrappers to connect to remote hosts.
        type: string
        env:
        - name: ANSIBLE_SSH_EXECUTABLE
        ini:
        - key: ssh_executable
          section: ssh_connection
        vars:
        - name: ansible_ssh_executable
      sftp_executable:
        default: sftp
        description:
        - This defines the location of the sftp binary. It defaults to V(sftp) which will use the first binary
          available in $PATH.
        type: string
        env:
        - name: ANSIBLE_SFTP_EXECUTABLE
        ini:
        - key: sftp_executable
          section: ssh_connection
        vars:
        - name: ansible_sftp_executable
      scp_executable:
        default: scp
        description:
        - This defines the location of the scp binary. It defaults to V(scp) which will use the first binary
          available in $PATH.
        type: string
        env:
        - name: ANSIBLE_SCP_EXECUTABLE
        ini:
        - key: scp_executable
          section: ssh_connection
        vars:
        - name: ansible_scp_executable
      scp_extra_args:
        description: Extra exclusive to the C(scp) CLI
        type: string
        vars:
        - name: ansible_scp_extra_args
        env:
        - name: ANSIBLE_SCP_EXTRA_ARGS
        ini:
        - key: scp_extra_args
          section: ssh_connection
        cli:
        - name: scp_extra_args
        default: ''
      sftp_extra_args:
        description: Extra exclusive to the C(sftp) CLI
        type: string
        vars:
        - name: ansible_sftp_extra_args
        env:
        - name: ANSIBLE_SFTP_EXTRA_ARGS
        ini:
        - key: sftp_extra_args
          section: ssh_connection
        cli:
        - name: sftp_extra_args
        default: ''
      ssh_extra_args:
        description: Extra exclusive to the SSH CLI.
        type: string
        vars:
        - name: ansible_ssh_extra_args
        env:
        - name: ANSIBLE_SSH_EXTRA_ARGS
        ini:
        - key: ssh_extra_args
          section: ssh_connection
        cli:
        - name: ssh_extra_args
        default: ''
      reconnection_retries:
        description:
        - Number of attempts to connect.
        - Ansible retries connections only if it gets an SSH error with a return code of 255.
        - Any errors with return codes other than 255 indicate an issue with program execution.
        default: 0
        type: integer
        env:
        - name: ANSIBLE_SSH_RETRIES
        ini:
        - section: connection
          key: retries
        - section: ssh_connection
          key: retries
        vars:
        - name: ansible_ssh_retries
      port:
        description: Remote port to connect to.
        type: int
        ini:
        - section: defaults
          key: remote_port
        env:
        - name: ANSIBLE_REMOTE_PORT
        vars:
        - name: ansible_port
        - name: ansible_ssh_port
        keyword:
        - name: port
      remote_user:
        description:
        - User name with which to login to the remote server, normally set by the remote_user keyword.
        - If no user is supplied, Ansible will let the SSH client binary choose the user as it normally.
        type: string
        ini:
        - section: defaults
          key: remote_user
        env:
        - name: ANSIBLE_REMOTE_USER
        vars:
        - name: ansible_user
        - name: ansible_ssh_user
        cli:
        - name: user
        keyword:
        - name: remote_user
      pipelining:
        description:
        - Pipe module payloads to the container's Python instead of copying them first (one round trip a task
          less; the channel runs piped modules without a new Python where it can).
        - On by default, unlike P(ansible.builtin.ssh#connection)'s, so an installed collection runs as fast as
          a checkout; V(false) in a config, the environment or C(ansible_pipelining) turns it off.
        type: boolean
        default: true
        env:
        - name: ANSIBLE_PIPELINING
        - name: ANSIBLE_SSH_PIPELINING
        ini:
        - section: defaults
          key: pipelining
        - section: connection
          key: pipelining
        - section: ssh_connection
          key: pipelining
        vars:
        - name: ansible_pipelining
        - name: ansible_ssh_pipelining
      private_key_file:
        description:
        - Path to private key file to use for authentication.
        type: string
        ini:
        - section: defaults
          key: private_key_file
        env:
        - name: ANSIBLE_PRIVATE_KEY_FILE
        vars:
        - name: ansible_private_key_file
        - name: ansible_ssh_private_key_file
        cli:
        - name: private_key_file
          option: --private-key
      private_key:
        description:
        - Private key contents in PEM format. Requires the C(SSH_AGENT) configuration to be enabled.
        type: string
        env:
        - name: ANSIBLE_PRIVATE_KEY
        vars:
        - name: ansible_private_key
        - name: ansible_ssh_private_key
      private_key_passphrase:
        description:
        - Private key passphrase, dependent on O(private_key).
        - This does NOT have any effect when used with O(private_key_file).
        type: string
        env:
        - name: ANSIBLE_PRIVATE_KEY_PASSPHRASE
        vars:
        - name: ansible_private_key_passphrase
        - name: ansible_ssh_private_key_passphrase
      control_path:
        description:
        - This is the location to save SSH's ControlPath sockets, it uses SSH's variable substitution.
        - Since 2.3, if null (default), ansible will generate a unique hash. Use ``%(directory)s`` to indicate
          where to use the control dir path setting.
        - Before 2.3 it defaulted to ``control_path=%(directory)s/ansible-ssh-%%h-%%p-%%r``.
        - Be aware that this setting is ignored if C(-o ControlPath) is set in ssh args.
        type: string
        env:
        - name: ANSIBLE_SSH_CONTROL_PATH
        ini:
        - key: control_path
          section: ssh_connection
        vars:
        - name: ansible_control_path
      control_path_dir:
        default: ~/.ansible/cp
        description:
        - This sets the directory to use for ssh control path if the control path setting is null.
        - Also, provides the ``%(directory)s`` variable for the control path setting.
        type: string
        env:
        - name: ANSIBLE_SSH_CONTROL_PATH_DIR
        ini:
        - section: ssh_connection
          key: control_path_dir
        vars:
        - name: ansible_control_path_dir
      sftp_batch_mode:
        default: true
        description:
        - When set to C(True), sftp will be run in batch mode, allowing detection of transfer errors.
        - When set to C(False), sftp will not be run in batch mode, preventing detection of transfer errors.
        env:
        - name: ANSIBLE_SFTP_BATCH_MODE
        ini:
        - key: sftp_batch_mode
          section: ssh_connection
        type: bool
        vars:
        - name: ansible_sftp_batch_mode
      ssh_transfer_method:
        description: Preferred method to use when transferring files over ssh
        choices:
          sftp: This is the most reliable way to copy things with SSH.
          scp: Deprecated in OpenSSH. For OpenSSH >=9.0 you must add an additional option to enable scp C(scp_extra_args="-O").
          piped: Creates an SSH pipe with C(dd) on either side to copy the data.
          smart: Tries each method in order (sftp > scp > piped), until one succeeds or they all fail.
        default: smart
        type: string
        env:
        - name: ANSIBLE_SSH_TRANSFER_METHOD
        ini:
        - key: transfer_method
          section: ssh_connection
        vars:
        - name: ansible_ssh_transfer_method
      use_tty:
        default: true
        description: add -tt to ssh commands to force tty allocation.
        env:
        - name: ANSIBLE_SSH_USETTY
        ini:
        - key: usetty
          section: ssh_connection
        type: bool
        vars:
        - name: ansible_ssh_use_tty
      timeout:
        default: 10
        description:
        - This is the default amount of time we will wait while establishing an SSH connection.
        - It also controls how long we can wait to access reading the connection once established (select
          on the socket).
        env:
        - name: ANSIBLE_TIMEOUT
        - name: ANSIBLE_SSH_TIMEOUT
        ini:
        - key: timeout
          section: defaults
        - key: timeout
          section: ssh_connection
        vars:
        - name: ansible_ssh_timeout
        cli:
        - name: timeout
        type: integer
      pkcs11_provider:
        default: ''
        type: string
        description:
        - 'PKCS11 SmartCard provider such as opensc, example: /usr/local/lib/opensc-pkcs11.so'
        env:
        - name: ANSIBLE_PKCS11_PROVIDER
        ini:
        - key: pkcs11_provider
          section: ssh_connection
        vars:
        - name: ansible_ssh_pkcs11_provider
      verbosity:
        default: 0
        type: int
        description:
        - Requested verbosity level for the SSH CLI.
        env:
        - name: ANSIBLE_SSH_VERBOSITY
        ini:
        - key: verbosity
          section: ssh_connection
        vars:
        - name: ansible_ssh_verbosity
"""

EXAMPLES = r"""
# inventory: the container is reached through its node (ansible_host); switching from the stock
# plugin is one line (ansible_connection).
all:
  hosts:
    ct200:
      ansible_host: pve1.example.org
      ansible_user: root
      ansible_connection: gpulxc.sglang.pct_ssh
      proxmox_vmid: 200
"""

import contextlib
import gc
import hashlib
import multiprocessing
import os
import re
import shlex
import time
import uuid

from ansible.errors import AnsibleConnectionFailure, AnsibleError, AnsibleFileNotFound
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.connection.ssh import Connection as SSHConnection
from ansible.release import __version__ as ansible_core_version
from ansible.utils.display import Display
from ansible.utils.path import makedirs_safe
from ansible_collections.gpulxc.sglang.plugins.plugin_utils import option_definitions, pct_channel, pct_channel_agent

display = Display()


def _freeze_inherited_objects():
    """In a task's worker process, keep the garbage collector off the objects inherited from the controller.

    ansible-core forks one worker per task from a controller holding the whole play in memory; the first full
    collection in the worker walks every inherited object and so copies each page it touches (copy-on-write):
    about 40 ms a task, a third of a no-op re-run of site.yml. The worker lives for one task, so what it
    inherited stays alive anyway; gc.freeze() is what Python's documentation advises for fork without exec.
    A task's worker is the one process that loads the plugin as a multiprocessing child (ansible-core's
    WorkerProcess, which is no public API): the controller, ansible-doc and tests have no parent process.
    """
    if multiprocessing.parent_process() is not None:
        gc.freeze()


_freeze_inherited_objects()
option_definitions.register("connection", __name__, DOCUMENTATION, __file__)

# The ansible-core minors the preload is tested with (tools/test's sanity and unit legs run on each): it runs modules
# on private parts of their payload, so on any other core it stays off. The same list is what requires_ansible in
# meta/runtime.yml claims (tests/unit/test_core_versions.py).
PRELOAD_CORE_VERSIONS = ("2.19", "2.20", "2.21")

# What pct prints when the container cannot take the command (patterns of pct's own messages, for the
# vmid at hand, so a command's output is never taken for one), and what the user should do. pct's
# refusals are Perl dies: they exit with whatever errno is left (often 2), not always 255.
PCT_ERRORS = (
    (
        r"container '{vmid}' not running!",
        "CT {vmid} is not running on {host}: start it (pct start {vmid}) or run the "
        "gpulxc.sglang.pct_container role first",
    ),
    (r"can only push files to a running CT", "CT {vmid} is not running on {host}: start it (pct start {vmid})"),
    (r"can only pull files from a running VM", "CT {vmid} is not running on {host}: start it (pct start {vmid})"),
    (
        r"Configuration file 'nodes/[^/']+/lxc/{vmid}\.conf' does not exist",
        "CT {vmid} does not exist on {host} (pct: {detail}); check proxmox_vmid or create it "
        "with the gpulxc.sglang.pct_container role",
    ),
    (
        r"CT is locked \((?P<lock>[^)]+)\)",
        "CT {vmid} on {host} is locked ({lock}: a backup, migration or snapshot holds it); wait for it to "
        "finish, or clear a stale lock with pct unlock {vmid}",
    ),
)
# Seconds since the container's systemd started, on the container's own clock (/proc/uptime there is the node's
# unless lxcfs serves it; systemd's time in UTC, which `date -d` reads whatever the zone): less than a lost command
# had run, and the container restarted under it.
CT_UPTIME_COMMAND = (
    "/bin/sh -c 'echo $(( $(date +%s) - $(date -d \"$(TZ=UTC systemctl show -p UserspaceTimestamp --value)\" +%s) ))'"
)
# What pct push/pull print on stderr that is not a failure (PVE::Tools::lock_file_full waiting).
PCT_TRANSFER_NOISE = ("trying to acquire lock...", " OK", "")


class Connection(SSHConnection):
    """OpenSSH to the Proxmox node (ControlPersist, pipelining), then `pct exec <vmid>` into the CT."""

    transport = "gpulxc.sglang.pct_ssh"
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._node_level = False

    # -- command construction ------------------------------------------------------------------

    def _node_prefix(self):
        """`sudo -n ` when the SSH user is not root (pct needs root on the node), else nothing."""
        user = self.get_option("remote_user")
        if user in (None, "root"):
            return ""
        return "%s -n " % self.get_option("proxmox_become_method")

    def _pct(self, *args):
        return self._node_prefix() + " ".join(
            [shlex.quote(self.get_option("pct_executable"))] + [shlex.quote(str(a)) for a in args]
        )

    def _container_command(self, cmd):
        """The node-side command that runs `cmd` (a shell command line) in the container's /bin/sh, with
        the environment it needs set explicitly (pct exec's own policy differs between PVE releases)."""
        return self._pct("exec", self.get_option("vmid"), "--", *pct_channel.CONTAINER_ENV, "/bin/sh", "-c", cmd)

    # -- errors ----------------------------------------------------------------------------------

    def _explain(self, detail, returncode=255):
        """A clear message for a failure of the node side (SSH user, sudo, pct), or None."""
        detail = to_text(detail).strip()
        # what pct said, without the SSH layer's wording around it
        for prefix in ("reached over ssh: ", "Failed to connect to the host via ssh: "):
            detail = detail.rsplit(prefix, 1)[-1]
        host = self.get_option("host") or self._play_context.remote_addr
        pct = self.get_option("pct_executable")
        user = self.get_option("remote_user")
        if returncode == 127 and pct in detail:
            return "%s not found on %s: is it a Proxmox VE node? (set proxmox_pct_executable)" % (pct, host)
        if self._node_prefix() and "sudo:" in detail and "password" in detail:
            return (
                "%s on %s needs root: allow %s to run it without a password (sudoers: "
                "%s ALL = (root) NOPASSWD: %s), or connect as root" % (pct, host, user, user, pct)
            )
        vmid = self.get_option("vmid")
        for pattern, message in PCT_ERRORS:
            match = re.search(pattern.replace("{vmid}", re.escape(str(vmid))), detail)
            if match:
                return message.format(vmid=vmid, host=host, detail=detail, **match.groupdict())
        return None

    def _node_exec(self, cmd, in_data=None):
        """Run a command on the node itself (not in the container)."""
        self._node_level = True
        try:
            return super().exec_command(cmd, in_data=in_data, sudoable=False)
        finally:
            self._node_level = False

    # -- the channel -----------------------------------------------------------------------------------

    def _channel_usable(self):
        """The channel runs without a terminal and answers no prompts: not with an SSH password or key given
        inline, and not for become in the container (its prompt and success marker are for SSH's reader)."""
        if not self.get_option("pct_channel") or self.get_option("password") or self.get_option("private_key"):
            return False
        return not self.become

    def _channel_path(self):
        directory = os.path.expanduser(self.get_option("control_path_dir"))
        makedirs_safe(directory, 0o700)
        key = "%s|%s|%s|%s|%s|%s" % (
            self.host,
            self.get_option("port"),
            self.get_option("remote_user"),
            self.get_option("vmid"),
            self.get_option("pct_executable"),
            self._preload(),
        )
        return os.path.join(directory, "pct-" + hashlib.sha256(key.encode()).hexdigest()[:16])

    def _preload(self):
        """Whether the channel forks modules from its preloaded Python: as asked, on a tested ansible-core."""
        if not self.get_option("pct_channel_preload"):
            return False
        minor = ".".join(ansible_core_version.split(".")[:2])
        if minor in PRELOAD_CORE_VERSIONS:
            return True
        display.vvv("PCT CHANNEL preload off: ansible-core %s is not one it is tested with" % minor, host=self.host)
        return False

    def _channel_exec(self, cmd, in_data):
        """(rc, stdout, stderr) through the container's channel; None when the channel cannot take it."""
        self.host = self.get_option("host") or self._play_context.remote_addr
        node_command = self._pct("exec", self.get_option("vmid"), "--", *pct_channel.CONTAINER_ARGV)
        node_argv = [
            os.fsdecode(arg)
            for arg in self._build_command(self.get_option("ssh_executable"), "ssh", self.host, node_command)
        ]
        display.vvv("PCT CHANNEL %s" % cmd, host=self.host)
        started = time.monotonic()
        try:
            return pct_channel.run(
                self._channel_path(),
                cmd,
                in_data,
                start={
                    "node_argv": node_argv,
                    "agent": pct_channel_agent.__file__,
                    "preload": self._preload(),
                    "idle": self.get_option("pct_channel_persist"),
                    "timeout": self.get_option("timeout") + 20,
                },
            )
        except pct_channel.Unavailable as exc:
            display.vvv("PCT CHANNEL not used (%s): plain pct exec" % exc, host=self.host)
            return None
        except pct_channel.Lost as exc:
            elapsed = time.monotonic() - started
            # the container stopped or restarted under the command, most likely: then say so
            try:
                self._pct_exec("true", None, sudoable=False)
            except AnsibleConnectionFailure as failure:
                if " is not running on " not in failure.message:
                    raise
                raise AnsibleConnectionFailure(
                    "CT %s on %s stopped under the task (a shutdown or a reboot, from the node or inside it): the "
                    "task was cut off and whether its command ran is unknown; once the CT runs again (pct start %s "
                    "if it stays stopped), run the play again"
                    % (self.get_option("vmid"), self.host, self.get_option("vmid"))
                ) from None
            raise AnsibleConnectionFailure(self._lost(exc, elapsed)) from None

    def _lost(self, exc, elapsed):
        """What a command lost with the channel says: a container restarted under it is named as such."""
        vmid = self.get_option("vmid")
        returncode, stdout, _stderr = self._pct_exec(CT_UPTIME_COMMAND, None, sudoable=False)
        try:
            uptime = int(to_text(stdout).strip()) if returncode == 0 else None
        except ValueError:
            uptime = None
        if uptime is not None and uptime < elapsed:
            return (
                "CT %s on %s restarted while the task ran (it has been up %d s, the task ran %d s): the task was cut "
                "off and whether its command ran is unknown; run the play again: it checks every step and repairs "
                "what the restart left half done" % (vmid, self.host, uptime, elapsed)
            )
        return "CT %s on %s: %s; whether the command ran is unknown" % (vmid, self.host, exc)

    def reset(self):
        """meta: reset_connection: the next command starts a new channel (the old one exits when idle)."""
        super().reset()
        self.host = self.get_option("host") or self._play_context.remote_addr
        with contextlib.suppress(OSError):
            os.unlink(self._channel_path())

    # -- the connection API ----------------------------------------------------------------------

    def exec_command(self, cmd, in_data=None, sudoable=True):
        if self._node_level:
            return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        if self._channel_usable():
            result = self._channel_exec(cmd, in_data)
            if result is not None:
                return result
        return self._pct_exec(cmd, in_data, sudoable)

    def _pct_exec(self, cmd, in_data, sudoable):
        """`cmd` through its own SSH session and `pct exec`; pct's refusals become clear errors."""
        wrapped = self._container_command(cmd)
        display.vvv("PCT EXEC %s" % wrapped, host=self.get_option("host"))
        try:
            returncode, stdout, stderr = super().exec_command(wrapped, in_data=in_data, sudoable=sudoable)
        except AnsibleConnectionFailure as exc:
            # ssh takes exit code 255 for its own failure; pct's refusals can exit 255 too.
            explained = self._explain(exc.message)
            if explained:
                raise AnsibleConnectionFailure(explained) from None
            raise
        if returncode != 0:
            explained = self._explain(stderr, returncode)
            if explained:
                raise AnsibleConnectionFailure(explained)
        return returncode, stdout, stderr

    def put_file(self, in_path, out_path):
        self.host = self.get_option("host") or self._play_context.remote_addr
        if not os.path.exists(to_bytes(in_path, errors="surrogate_or_strict")):
            raise AnsibleFileNotFound("file or module does not exist: %s" % in_path)
        size = os.path.getsize(in_path)
        display.vvv("PUT %s TO %s (%d bytes)" % (in_path, out_path, size), host=self.host)
        if size <= self.get_option("pct_transfer_threshold"):
            with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as handle:
                data = handle.read()
            returncode, stdout, stderr = self.exec_command(
                "cat > %s" % shlex.quote(out_path), in_data=data, sudoable=False
            )
            if returncode != 0:
                raise AnsibleError("failed to transfer file to %s: %s" % (out_path, to_text(stderr).strip()))
            return returncode, stdout, stderr
        staged = ".ansible-pct-%s" % uuid.uuid4().hex
        self._node_level = True
        try:
            super()._file_transport_command(in_path, staged, "put")
        finally:
            self._node_level = False
        vmid = self.get_option("vmid")
        sizes = self._node_transfer(
            staged,
            self._pct("push", vmid, "STAGED", out_path),
            self._pct("exec", vmid, "--", "/usr/bin/stat", "-c", "%s", "--", out_path),
            "failed to transfer file to %s" % out_path,
        )
        self._check_size("failed to transfer file to %s" % out_path, sizes.get("in"), size)
        return 0, b"", b""

    def fetch_file(self, in_path, out_path):
        self.host = self.get_option("host") or self._play_context.remote_addr
        display.vvv("FETCH %s TO %s" % (in_path, out_path), host=self.host)
        staged = ".ansible-pct-%s" % uuid.uuid4().hex
        vmid = self.get_option("vmid")
        pull = ["pull", vmid, in_path, "STAGED"]
        user = self.get_option("remote_user")
        if user not in (None, "root"):
            pull += ["--user", user]
        try:
            sizes = self._node_transfer(
                staged,
                self._pct(*pull),
                self._pct("exec", vmid, "--", "/usr/bin/stat", "-c", "%s", "--", in_path),
                "failed to fetch %s" % in_path,
                remove=False,
            )
            # fewer bytes than the source has (a file of /proc may read more than its size says)
            if sizes.get("staged") is None or sizes.get("staged") < sizes.get("in", 0):
                self._check_size("failed to fetch %s" % in_path, sizes.get("staged"), sizes.get("in"))
            self._node_level = True
            try:
                return super()._file_transport_command(staged, out_path, "get")
            finally:
                self._node_level = False
        finally:
            self._node_exec('rm -f -- "$HOME"/%s' % staged)

    def _node_transfer(self, staged, command, stat_in_ct, what, remove=True):
        """Run pct push/pull (`command`, with STAGED as $HOME/<staged>) on the node, then read the size of
        the file in the container and of the staged one. pct push/pull exit 0 and only print on stderr
        when the copy fails in their worker (a missing source or directory, a short write): any stderr
        but the lock wait, or sizes that differ, is a failure. Returns {'in': ..., 'staged': ...}."""
        staged_path = '"$HOME"/%s' % staged
        command = command.replace("STAGED", staged_path)
        script = "rc=0; %s || rc=$?" % command
        script += "; if [ $rc -eq 0 ]; then printf 'in=%%s\\n' \"$(%s 2>/dev/null)\"" % stat_in_ct
        script += "; printf 'staged=%%s\\n' \"$(stat -c %%s -- %s 2>/dev/null)\"; fi" % staged_path
        if remove:
            script += "; rm -f -- %s" % staged_path
        script += "; [ $rc -eq 0 ] || exit 1"
        returncode, stdout, stderr = self._node_exec(script)
        said = to_text(stderr).strip()
        explained = self._explain(stderr, returncode) if returncode != 0 or said else None
        if explained:
            raise AnsibleConnectionFailure(explained)
        if returncode != 0:
            raise AnsibleError("%s: %s" % (what, said))
        noise = [line for line in to_text(stderr).splitlines() if line not in PCT_TRANSFER_NOISE]
        if noise:
            raise AnsibleError("%s: pct: %s" % (what, "; ".join(noise)))
        sizes = {}
        for line in to_text(stdout).splitlines():
            key, _sep, value = line.partition("=")
            if value.strip().isdigit():
                sizes[key] = int(value)
        return sizes

    def _check_size(self, what, got, expected):
        if got != expected:
            raise AnsibleError(
                "%s: %s bytes arrived of %s (a short copy: is the file system full?)"
                % (what, "no" if got is None else got, "unknown" if expected is None else expected)
            )

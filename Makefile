# Both targets do all their own set-up (Debian packages, .venv, the lab) on Debian 12, as root.
.PHONY: demo test lab lab-clean

# Build the lab and run the main job: CT 200 from an empty (stand-in) Proxmox node.
demo:
	tools/bootstrap
	lab/setup
	.venv/bin/ansible-playbook site.yml -i inventories/lab -l ct200
	@echo "--- CT 200 through the pct connection (gpulxc.sglang.pct_ssh):"
	.venv/bin/ansible ct200 -i inventories/lab -m ansible.builtin.command -a 'systemctl is-system-running'

# Every suite, each with its wall time.
test:
	tools/test

lab:
	lab/setup

# Remove everything the lab made (containers, /etc/pve, pct, device nodes, sshd, template).
lab-clean:
	lab/teardown

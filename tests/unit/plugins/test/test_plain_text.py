"""gpulxc.sglang.plain_text, as ansible-playbook sees the values: one run on localhost with a variable from every
place an operator writes or keeps a value, each asked `is gpulxc.sglang.plain_text`; then the cases where the
source cannot be read, called directly."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.vault import VaultLib, VaultSecret, VaultSecretsContext
from ansible.template import trust_as_template
from ansible_collections.gpulxc.sglang.plugins.test import plain_text as plugin

REPO = Path(__file__).resolve().parents[4]
PASSWORD = "gpulxc-unit-test"

# label: plain text (refused) or not (accepted)
EXPECTED = {
    # written as it is in an inventory, a vars file, a playbook, or on the command line
    "yaml_inventory_host": True,
    "yaml_inventory_group": True,
    "ini_inventory_host": True,
    "ini_inventory_group": True,
    "group_vars_file": True,
    "host_vars_file": True,
    "play_vars": True,
    "vars_file": True,
    "include_vars": True,
    "unsafe_literal": True,
    "number_literal": True,
    "through_a_variable": True,
    "block_literal": True,
    "set_fact_literal": True,
    "set_fact_of_plain": True,
    "cli_key_value": True,
    "cli_json": True,
    # kept where secrets are kept
    "inline_vault": False,
    "vault_file": False,
    "vault_extra_vars_file": False,
    "through_a_vaulted_variable": False,
    "extra_vars_yaml": False,
    "extra_vars_json": False,
    "awx_extravars": False,
    "env_lookup": False,
    "file_lookup": False,
    "pipe_lookup": False,
    "block_lookup": False,
    "set_fact_of_lookup": False,
    "module_result": False,
}


def vault(text):
    return VaultLib([("default", VaultSecret(PASSWORD.encode()))]).encrypt(text).decode()


def indented(text, by="  "):
    return "\n".join(by + line for line in text.splitlines())


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    (root / "pass").write_text(PASSWORD + "\n")
    (root / "key.txt").write_text("from-a-file\n")
    (root / "inventory").mkdir()
    (root / "inventory/hosts.yml").write_text(f"""\
all:
  hosts:
    localhost:
      ansible_connection: local
      ansible_python_interpreter: {REPO}/.venv/bin/python
      yaml_inventory_host: typed-in
      unsafe_literal: !unsafe typed-in
      number_literal: 123456
      through_a_variable: "{{{{ yaml_inventory_host }}}}"
      block_literal: >-
        typed-in
      inline_vault: !vault |
{indented(vault("vaulted"), "        ")}
      through_a_vaulted_variable: "{{{{ inline_vault }}}}"
      env_lookup: "{{{{ lookup('ansible.builtin.env', 'GPULXC_UNIT_KEY') }}}}"
      file_lookup: "{{{{ lookup('ansible.builtin.file', '{root}/key.txt') }}}}"
      pipe_lookup: "{{{{ lookup('ansible.builtin.pipe', 'echo from-a-command') }}}}"
      block_lookup: >-
        {{{{ lookup('ansible.builtin.env', 'GPULXC_UNIT_KEY') }}}}
  vars:
    yaml_inventory_group: typed-in
""")
    (root / "inventory/hosts.ini").write_text(
        "localhost ini_inventory_host=typed-in\n[all:vars]\nini_inventory_group=x\n"
    )
    (root / "inventory/group_vars/all").mkdir(parents=True)
    (root / "inventory/group_vars/all/plain.yml").write_text("group_vars_file: typed-in\n")
    (root / "inventory/group_vars/all/vault.yml").write_text(vault("vault_file: vaulted\n"))
    (root / "inventory/host_vars").mkdir()
    (root / "inventory/host_vars/localhost.yml").write_text("host_vars_file: typed-in\n")
    (root / "vars.yml").write_text("vars_file: typed-in\n")
    (root / "included.yml").write_text("include_vars: typed-in\n")
    (root / "extra.yml").write_text("extra_vars_yaml: from-a-file\n")
    (root / "extra.json").write_text(json.dumps({"extra_vars_json": "from-a-file"}))
    (root / "extra-vault.yml").write_text(vault("vault_extra_vars_file: vaulted\n"))
    (root / "env").mkdir()  # as ansible-runner writes AWX's extra variables (values marked unsafe)
    (root / "env/extravars").write_text("awx_extravars: !unsafe 'from-awx'\n")
    labels = sorted(EXPECTED)
    (root / "play.yml").write_text(f"""\
- hosts: localhost
  gather_facts: false
  vars:
    play_vars: typed-in
  vars_files: [vars.yml]
  tasks:
    - ansible.builtin.include_vars: included.yml
    - ansible.builtin.command: echo from-a-module
      register: registered
      changed_when: false
    - ansible.builtin.set_fact:
        set_fact_literal: typed-in
        set_fact_of_plain: "{{{{ yaml_inventory_host }}}}"
        set_fact_of_lookup: "{{{{ lookup('ansible.builtin.env', 'GPULXC_UNIT_KEY') }}}}"
        module_result: "{{{{ registered.stdout }}}}"
    - ansible.builtin.copy:
        dest: {root}/verdicts.json
        content: "{{{{ verdicts | to_json }}}}"
        mode: "0600"
      vars:
        verdicts:
{chr(10).join(f"          {label}: '{{{{ {label} is gpulxc.sglang.plain_text }}}}'" for label in labels)}
""")
    env = dict(os.environ, GPULXC_UNIT_KEY="from-the-environment", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.run(
        [
            str(REPO / ".venv/bin/ansible-playbook"),
            "play.yml",
            "-i",
            "inventory/hosts.yml",
            "-i",
            "inventory/hosts.ini",
            "--vault-password-file",
            "pass",
            "-e",
            "cli_key_value=typed-in",
            "-e",
            '{"cli_json": "typed-in"}',
            "-e",
            "@extra.yml",
            "-e",
            "@extra.json",
            "-e",
            "@extra-vault.yml",
            "-e",
            f"@{root}/env/extravars",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((root / "verdicts.json").read_text())


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_each_source(verdicts, label):
    assert verdicts[label] is EXPECTED[label], label


def test_a_value_whose_source_cannot_be_read_counts_as_plain_text(tmp_path):
    untrusted = "not trusted as a template"  # as a lookup's result or an !unsafe literal is
    assert plugin.plain_text(plugin.Origin(path=str(tmp_path / "gone.yml"), line_num=3).tag(untrusted)) is True
    (tmp_path / "short.yml").write_text("key: x\n")
    assert plugin.plain_text(plugin.Origin(path=str(tmp_path / "short.yml"), line_num=9).tag(untrusted)) is True
    assert plugin.plain_text(plugin.Origin(path=str(tmp_path / "short.yml")).tag(untrusted)) is True  # no line
    (tmp_path / "lookup.yml").write_text("key: \"{{ lookup('ansible.builtin.env', 'X') }}\"\n")
    assert (
        plugin.plain_text(plugin.Origin(path=str(tmp_path / "lookup.yml"), line_num=1, col_num=6).tag(untrusted))
        is False
    )
    trusted = trust_as_template("typed-in")
    assert (
        plugin.plain_text(plugin.Origin(path=str(tmp_path / "lookup.yml"), line_num=1, col_num=6).tag(trusted)) is True
    )


def test_an_origin_of_no_file_is_plain_text_unless_the_environment(tmp_path):
    assert plugin.plain_text(plugin.Origin(description="<CLI option '-e'>").tag("x")) is True
    assert plugin.plain_text(plugin.Origin(description="<something else>").tag("x")) is True
    assert plugin.plain_text(plugin.Origin(description="<environment variable 'K'>").tag("x")) is False
    assert plugin.plain_text("no origin at all") is False  # a module's result


def test_without_data_tagging_only_a_vaulted_value_passes(monkeypatch, tmp_path):
    secrets = [("default", VaultSecret(PASSWORD.encode()))]
    monkeypatch.setattr(VaultSecretsContext, "_current", VaultSecretsContext(secrets))  # as the CLI sets it
    loader = DataLoader()
    loader.set_vault_secrets(secrets)
    (tmp_path / "inline.yml").write_text(f"key: !vault |\n{indented(vault('vaulted'))}\nfrom_a_module: x\n")
    data = loader.load_from_file(str(tmp_path / "inline.yml"))
    monkeypatch.setattr(plugin, "Origin", None)
    assert plugin.plain_text(data["key"]) is False
    assert plugin.plain_text("from a module") is True  # cannot tell

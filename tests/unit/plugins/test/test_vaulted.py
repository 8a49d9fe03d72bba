"""gpulxc.sglang.vaulted: values as Ansible's loader reads them from plain files, inline !vault values and
files encrypted with ansible-vault."""

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.vault import VaultLib, VaultSecret, VaultSecretsContext
from ansible_collections.gpulxc.sglang.plugins.test.vaulted import vaulted

SECRET = [("default", VaultSecret(b"gpulxc-unit-test"))]


@pytest.fixture
def loader(monkeypatch):
    monkeypatch.setattr(VaultSecretsContext, "_current", VaultSecretsContext(SECRET))  # as the CLI sets it
    data_loader = DataLoader()
    data_loader.set_vault_secrets(SECRET)
    return data_loader


def encrypt(text):
    return VaultLib(SECRET).encrypt(text).decode()


def test_plain_file_value_is_not_vaulted(loader, tmp_path):
    (tmp_path / "plain.yml").write_text("key: plain-text-key\n")
    assert vaulted(loader.load_from_file(str(tmp_path / "plain.yml"))["key"]) is False


def test_inline_vault_value_is_vaulted(loader, tmp_path):
    body = "\n".join("  " + line for line in encrypt("inline-key").splitlines())
    (tmp_path / "inline.yml").write_text(f"key: !vault |\n{body}\nother: plain\n")
    data = loader.load_from_file(str(tmp_path / "inline.yml"))
    assert data["key"] == "inline-key"
    assert vaulted(data["key"]) is True
    assert vaulted(data["other"]) is False


def test_value_of_an_encrypted_file_is_vaulted(loader, tmp_path):
    (tmp_path / "vault.yml").write_text(encrypt("key: file-key\n"))
    data = loader.load_from_file(str(tmp_path / "vault.yml"))
    assert data["key"] == "file-key"
    assert vaulted(data["key"]) is True


def test_untagged_strings_are_not_vaulted():
    assert vaulted("from-the-command-line") is False
    assert vaulted("") is False

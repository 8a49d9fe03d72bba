"""Unit tests load the collection from the checkout's collection path (made by tools/bootstrap)."""

from pathlib import Path

from ansible.plugins.loader import init_plugin_loader

REPO = Path(__file__).resolve().parents[2]
init_plugin_loader([str(REPO / ".ansible/collections")])

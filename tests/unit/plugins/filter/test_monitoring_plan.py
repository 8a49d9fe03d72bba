"""gpulxc.sglang.monitoring_plan's contract and gpulxc.sglang.monitoring_files as plain functions (the plan's cases,
from the role's settings, are tests/unit/roles/test_monitoring.py)."""

import base64
import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpulxc.sglang.plugins.filter.monitoring import SETTINGS, monitoring_files, monitoring_plan

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
TARGETS = [{"targets": ["ct:8000"], "labels": {"component": "router", "__scheme__": "http"}}]
FILES = {"scrape": "/p/scrape/ct.yml", "targets": "/p/targets/ct.json", "cert": "/p/certs/ct.crt"}
# the plan's tls, what slurp returned, and the files expected after the scrape job's and the targets'
CASES = [
    (False, {"skipped": True}, []),
    (
        True,
        {"content": base64.b64encode(PEM.encode()).decode()},
        [{"path": "/p/certs/ct.crt", "mode": "0644", "content": PEM}],
    ),
]


@pytest.mark.parametrize(("tls", "certificate", "more"), CASES, ids=["plain", "tls"])
def test_the_files_are_the_scrape_job_the_targets_and_with_tls_the_certificate(tls, certificate, more):
    found = monitoring_files({"tls": tls, "files": FILES, "targets": TARGETS}, "job: 1\n", certificate)
    assert found[:2] == [
        {"path": "/p/scrape/ct.yml", "content": "job: 1\n", "mode": "0644"},
        {"path": "/p/targets/ct.json", "content": json.dumps(TARGETS, indent=4, sort_keys=True) + "\n", "mode": "0644"},
    ]
    assert found[2:] == more


@pytest.mark.parametrize("change", ["missing", "unknown"])
def test_a_setting_missing_or_unknown_is_an_error_naming_it(change):
    settings = dict.fromkeys(SETTINGS, "")
    settings.pop("sglang_monitoring_dir") if change == "missing" else settings.update(sglang_monitoring_dri="")
    with pytest.raises(AnsibleFilterError, match=r"sglang_monitoring_(dir|dri)$"):
        monitoring_plan(settings, "ct")


def test_anything_but_a_mapping_is_an_error():
    with pytest.raises(AnsibleFilterError, match="expects a mapping of the role's variables, got list"):
        monitoring_plan([], "ct")

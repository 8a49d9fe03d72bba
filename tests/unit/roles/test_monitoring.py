"""sglang_monitoring: the file_sd targets come from what sglang_services and sglang_router published (each server
at its path on the front, with its GPU and the servers' metric labels), the scrape job follows the front (TLS, a
client key), bad input is refused naming its variable, and every metric the alert rules and the Grafana dashboard
name is one the real servers and smg export (their /metrics recorded on the H200, tests/unit/fixtures). The plan is
gpulxc.sglang.monitoring_plan, called with the settings tasks/preflight.yml passes it (the role's defaults
templated over each case's variables)."""

import json
import re
from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from ansible_collections.gpulxc.sglang.plugins.filter.monitoring import monitoring_plan
from conftest import trusted

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles/sglang_monitoring"
FIXTURES = REPO / "tests/unit/fixtures"
SERVICES = {
    "instances": [
        {"name": f"sglang@{n}", "index": n, "gpu": n, "url": f"http://127.0.0.1:{30000 + n}"} for n in range(2)
    ],
    "metric_labels": {"container": "ct200", "node": "pve1"},
}
FRONT = {
    "host": "0.0.0.0",
    "port": 8000,
    "tls": True,
    "keyed": True,
    "metrics": {
        "router": "/metrics",
        "workers": {"http://127.0.0.1:30000": "/metrics/workers/0", "http://127.0.0.1:30001": "/metrics/workers/1"},
    },
}


def variables(**extra):
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    return {
        **trusted(defaults),
        "inventory_hostname": "ct200",
        "ansible_managed": "managed",
        "sglang_monitoring_dir": "/etc/prometheus/gpulxc",
        "sglang_monitoring_address": "ct200.example",
        "sglang_monitoring_credentials_file": "/etc/prometheus/gpulxc-key",
        "ansible_local": {"gpulxc_services": SERVICES, "gpulxc_router": {"dir": "/etc/smg", "front": FRONT}},
        **extra,
    }


def plan(**extra):
    """The role's plan: the settings preflight.yml passes, templated with the case's variables, through the filter."""
    preflight = yaml.safe_load((ROLE / "tasks/preflight.yml").read_text())
    settings = Templar(variables=variables(**extra)).template(trusted(preflight[0]["vars"]["_settings"]))
    return monitoring_plan(settings, "ct200")


def render(name, **extra):
    template = trust_as_template((ROLE / "templates" / name).read_text())
    return Templar(variables={**variables(**extra), "_sglang_monitoring_plan": plan(**extra)}).template(template)


def errors(**extra):
    return plan(**extra)["errors"]


def test_the_targets_are_the_router_and_each_server_through_the_front_with_their_labels():
    targets = plan()["targets"]
    assert [t["targets"] for t in targets] == [["ct200.example:8000"]] * 3
    common = {"__scheme__": "https", "container": "ct200", "node": "pve1"}
    assert [t["labels"] for t in targets] == [
        {**common, "__metrics_path__": "/metrics", "component": "router", "instance": "ct200/router"},
        {
            **common,
            "__metrics_path__": "/metrics/workers/0",
            "component": "server",
            "gpu": "0",
            "sglang_instance": "sglang@0",
            "instance": "ct200/sglang@0",
        },
        {
            **common,
            "__metrics_path__": "/metrics/workers/1",
            "component": "server",
            "gpu": "1",
            "sglang_instance": "sglang@1",
            "instance": "ct200/sglang@1",
        },
    ]
    assert errors() == []


def test_the_scrape_job_follows_the_front():
    job = yaml.safe_load(render("scrape.yml.j2"))["scrape_configs"]
    assert job == [
        {
            "job_name": "gpulxc-sglang-ct200",
            "scrape_interval": "15s",
            "honor_labels": True,
            "file_sd_configs": [{"files": ["/etc/prometheus/gpulxc/targets/ct200.json"]}],
            "tls_config": {"ca_file": "/etc/prometheus/gpulxc/certs/ct200.crt"},
            "authorization": {"type": "Bearer", "credentials_file": "/etc/prometheus/gpulxc-key"},
        }
    ]
    plain = {**FRONT, "tls": False, "keyed": False}
    local = {"gpulxc_services": SERVICES, "gpulxc_router": {"dir": "/etc/smg", "front": plain}}
    job = yaml.safe_load(render("scrape.yml.j2", ansible_local=local, sglang_monitoring_credentials_file=""))
    assert "tls_config" not in job["scrape_configs"][0] and "authorization" not in job["scrape_configs"][0]
    targets = plan(ansible_local=local)["targets"]
    assert {t["labels"]["__scheme__"] for t in targets} == {"http"}


def test_an_ipv6_address_is_bracketed():
    assert plan(sglang_monitoring_address="fd00::5")["endpoint"] == "[fd00::5]:8000"


BAD = [
    ({"sglang_monitoring_dir": "relative/dir"}, "sglang_monitoring_dir relative/dir is not an absolute path"),
    ({"sglang_monitoring_dir": "/etc/../tmp"}, "sglang_monitoring_dir /etc/../tmp is not an absolute path"),
    ({"sglang_monitoring_down_for": "1 minute"}, "sglang_monitoring_down_for: a Prometheus duration"),
    ({"sglang_monitoring_scrape_interval": "15"}, "sglang_monitoring_scrape_interval: a Prometheus duration"),
    ({"sglang_monitoring_kv_cache_threshold": 1.5}, "sglang_monitoring_kv_cache_threshold is 1.5; it must be a"),
    ({"sglang_monitoring_kv_cache_threshold": 0}, "sglang_monitoring_kv_cache_threshold is 0; it must be a"),
    ({"sglang_monitoring_queue_threshold": -1}, "sglang_monitoring_queue_threshold is -1; it must be 0 or more"),
    ({"sglang_monitoring_address": ""}, "sglang_monitoring_address is empty"),
    ({"sglang_monitoring_credentials_file": ""}, "the front of ct200 requires a client key"),
    ({"sglang_monitoring_credentials_file": "key.txt"}, "sglang_monitoring_credentials_file key.txt is not an"),
    ({"ansible_local": {"gpulxc_router": {"front": FRONT}}}, "no servers on ct200 (ansible_local.gpulxc_services)"),
    ({"ansible_local": {"gpulxc_services": SERVICES}}, "no router front on ct200 publishes its metrics"),
    (
        {"ansible_local": {"gpulxc_services": {**SERVICES, "metric_labels": None}, "gpulxc_router": {"front": FRONT}}},
        "the servers of ct200 run with sglang_services_enable_metrics false",
    ),
]


@pytest.mark.parametrize(("extra", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_input_is_named(extra, message):
    found = errors(**extra)
    assert len(found) == 1 and found[0].startswith(message), found


# PromQL's own words: functions are told apart by the "(" after them
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}


def metric_names(expression):
    """The metric names a PromQL expression selects: label matchers, ranges, strings, Grafana's $variables,
    grouping clauses and function calls left out."""
    text = re.sub(r'"[^"]*"', "", expression)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\$\w+", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", text)
    words = [m.group(0) for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text) if text[m.end() :].lstrip()[:1] != "("]
    return {w for w in words if w not in KEYWORDS}


def exported():
    names = {"up"}  # Prometheus' own, for every target
    for fixture in ("sglang/metrics-0.5.12-h200.txt", "smg/metrics-1.13.0-h200.txt"):
        for line in (FIXTURES / fixture).read_text().splitlines():
            if line and not line.startswith("#"):
                names.add(re.match(r"[^{ ]+", line).group(0))
    return names


def expressions():
    rules = yaml.safe_load(render("gpulxc-sglang.rules.yml.j2"))
    found = {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"]}
    dashboard = json.loads((ROLE / "files/gpulxc-sglang-dashboard.json").read_text())
    found.update({panel["title"]: target["expr"] for panel in dashboard["panels"] for target in panel["targets"]})
    return found


def test_every_alert_and_panel_names_metrics_the_real_servers_and_smg_export():
    found = expressions()
    assert {"SglangTargetDown", "SglangServerUnhealthy", "SglangQueueGrowing", "SglangKvCacheFull"} <= set(found)
    named = {title: metric_names(expr) for title, expr in found.items()}
    assert all(named.values()), {title: expr for title, expr in found.items() if not named[title]}
    missing = {title: names - exported() for title, names in named.items() if names - exported()}
    assert missing == {}


def test_the_metric_name_reader_finds_what_an_expression_selects():
    expr = 'histogram_quantile(0.95, sum by (le, gpu) (rate(sglang:x_bucket{job=~"a-.+", c=~"$c"}[5m]))) and up == 0'
    assert metric_names(expr) == {"sglang:x_bucket", "up"}
    assert metric_names("deriv(sglang:num_queue_reqs[5m]) > 0") == {"sglang:num_queue_reqs"}


def test_the_alert_rules_take_the_thresholds_and_durations_set():
    rules = yaml.safe_load(
        render("gpulxc-sglang.rules.yml.j2", sglang_monitoring_down_for="10s", sglang_monitoring_kv_cache_threshold=0.9)
    )
    by_name = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    assert by_name["SglangTargetDown"]["for"] == "10s"
    assert by_name["SglangKvCacheFull"]["expr"].endswith("> 0.9")
    assert "{{ $labels.instance }}" in by_name["SglangTargetDown"]["annotations"]["summary"]

"""sglang_services' metric labels: every server's --extra-metric-labels holds its GPU and the labels of
sglang_services_metric_labels (container and node by default), as the JSON string sglang's parser loads
(type `loads`: a mapping in the --config file is refused, review-sglang.md); bad label names and values are
refused before anything changes, naming the variable."""

import json

import pytest
import yaml
from test_services_instances import decided, errors, render


def labels_of(instance_number=0, **extra):
    facts = decided(**extra)
    written = yaml.safe_load(render("instance.yaml.j2", facts, facts["_sglang_services_plan"][instance_number]))
    return written


def test_each_server_labels_its_gpu_container_and_node_and_the_parser_takes_them(standin):
    written = labels_of(3)
    assert isinstance(written["extra-metric-labels"], str)  # JSON in a string, as the parser's `loads` wants
    assert json.loads(written["extra-metric-labels"]) == {"container": "ct200", "node": "pve1", "gpu": "3"}
    parsed = standin.build_parser().parse_args(standin.config_arguments(written))
    assert parsed.extra_metric_labels == {"container": "ct200", "node": "pve1", "gpu": "3"}


def test_operator_labels_are_added_as_strings_and_empty_ones_left_out():
    given = {"container": "ct200", "node": "", "site": "fra1", "rack": 7, "spare": None}
    written = labels_of(0, sglang_services_metric_labels=given)
    assert json.loads(written["extra-metric-labels"]) == {"container": "ct200", "site": "fra1", "rack": "7", "gpu": "0"}
    assert errors(sglang_services_metric_labels=given) == []


def test_without_metrics_no_labels_are_written():
    assert "extra-metric-labels" not in labels_of(0, sglang_services_enable_metrics=False)


@pytest.mark.parametrize(
    "name",
    ["1st", "has-dash", "has space", "dot.ted", "__reserved", "", "gpu", "model_name", "tp_rank", "engine_type"],
)
def test_a_label_name_prometheus_or_the_server_refuses_is_named(name):
    found = errors(sglang_services_metric_labels={"container": "ct200", name: "x"})
    assert len(found) == 1 and found[0].startswith(f"sglang_services_metric_labels: {name}: each label name"), found


@pytest.mark.parametrize("value", [["a", "b"], {"nested": "x"}])
def test_a_label_value_that_is_no_scalar_is_named(value):
    found = errors(sglang_services_metric_labels={"site": value})
    assert any(
        e.startswith("sglang_services_metric_labels: site: the value of a label is a string or a number") for e in found
    )

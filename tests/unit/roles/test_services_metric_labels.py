"""sglang_services' metric labels: every server's --extra-metric-labels holds its GPU and the labels of
sglang_services_metric_labels (container and node by default), as the JSON string sglang's parser loads
(type `loads`: a mapping in the --config file is refused, review-sglang.md); bad label names and values are
refused before anything changes, naming the variable."""

import json

import yaml
from services import decided, errors, render


def labels_of(instance_number=0, **extra):
    facts = decided(**extra)
    written = yaml.safe_load(
        render("instance.yaml.j2", facts, facts["_sglang_services_plan"]["servers"][instance_number])
    )
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
    assert errors(sglang_services_metric_labels=given) == []  # also a case of test_services_errors.yaml


def test_without_metrics_no_labels_are_written():
    assert "extra-metric-labels" not in labels_of(0, sglang_services_enable_metrics=False)


# the label names and values refused: test_services_errors.yaml

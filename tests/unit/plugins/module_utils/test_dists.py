"""_dists.canonical is the collection's one project-name normaliser (modules run where packaging is not
installed): it must give what PEP 503's reference, packaging.utils.canonicalize_name, gives for every name."""

import pytest
from ansible_collections.gpulxc.sglang.plugins.module_utils._dists import canonical
from packaging.utils import canonicalize_name

NAMES = [
    "sglang",
    "SGLang",
    "nvidia-cuda-runtime-cu12",
    "Nvidia_CUDA.Runtime",
    "flashinfer_python",
    "sgl-kernel",
    "zope.interface",
    "a__b",  # one normaliser read this a-b, another a--b
    "a--b",
    "a-_.b",
    "A..B",
    "a_-_b.-c",
    "torch",
    "typing_extensions",
    "ruamel.yaml.clib",
    "PyYAML",
    "x",
    "X1_2.3-4",
]


@pytest.mark.parametrize("name", NAMES)
def test_canonical_is_pep_503(name):
    assert canonical(name) == canonicalize_name(name)

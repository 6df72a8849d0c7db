"""Serving engines and their measured releases: names, version resolution, named errors."""

import pytest

from tilecast.serving.engines import (
    ENGINES,
    MEASURED_VERSIONS,
    UnknownEngineError,
    UnknownEngineVersionError,
    check_engine,
    resolve_version,
)


def test_engines_are_serving_csv_backends_and_case_blind():
    assert ENGINES == ("vllm", "sglang", "trtllm")
    assert check_engine(" SGLang ") == "sglang"
    with pytest.raises(UnknownEngineError, match=r"unknown serving engine 'tgi'; known: vllm, sglang, trtllm"):
        check_engine("tgi")


@pytest.mark.parametrize(("engine", "asked", "got"), [
    ("sglang", None, "0.5.14"),            # default: the newest measured
    ("sglang", float("nan"), "0.5.14"),    # an empty csv cell
    ("sglang", "0.5.14", "0.5.14"),
    ("sglang", "0.5.10.post1", "0.5.10"),  # same line, newest not newer
    ("sglang", "0.5.9", "0.5.10"),         # same line, older than any measured: the line's oldest
    ("trtllm", "1.3.0rc5", "1.3.0rc20"),
    ("trtllm", "1.2.0rc6.post1", "1.0.0"),  # between lines: newest not newer
    ("vllm", "0.19.0", "0.14.0"),
    ("vllm", "0.24.1", "0.24.0"),
])
def test_versions_resolve_to_a_measured_release(engine, asked, got):
    assert resolve_version(engine, asked) == got
    assert got in MEASURED_VERSIONS[engine]


@pytest.mark.parametrize(("engine", "asked", "why"), [
    ("trtllm", "0.8.1.post1", "outside the measured releases' span"),
    ("sglang", "0.6.0", "outside the measured releases' span"),
    ("vllm", "nightly-5b8c30d62b754b57", "is not a release number"),
])
def test_unknown_versions_name_the_measured_ones(engine, asked, why):
    with pytest.raises(UnknownEngineVersionError, match=why) as exc:
        resolve_version(engine, asked)
    assert all(v in str(exc.value) for v in MEASURED_VERSIONS[engine])

"""The suite's two process layouts: the ``workers`` environment runs only the tests marked as starting gateways
(``gateway.testing.GATEWAY_MARK``), so a test that starts one unmarked must fail rather than go untested there.

Each case runs pytest in a subprocess on a small test module, with a conftest that installs the check as the
suite's own does."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
from gateway import testing
from gateway.testing import MarkCheck, module_gateway, start_gateway

def pytest_configure(config):
    testing.MARK_CHECK = MarkCheck()
    config.pluginmanager.register(testing.MARK_CHECK, "gateway-mark-check")
"""

MODULE = """
import pytest
from gateway.testing import GatewayProcess, module_gateway

gateway = module_gateway(None)

@pytest.fixture
def schedd(gateway):
    return gateway

def test_through_a_fixture_of_a_fixture(schedd):
    pass

def test_with_the_per_test_fixture(start_gateway):
    pass

@pytest.mark.gateway
def test_marked_by_hand(tmp_path):
    pass

def test_of_no_gateway():
    pass
"""


def test_the_tests_using_gateway_fixtures_are_marked_at_collection(pytester: pytest.Pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sample=MODULE)
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-m", "gateway")
    result.stdout.fnmatch_lines(["*test_through_a_fixture_of_a_fixture", "*test_with_the_per_test_fixture",
                                 "*test_marked_by_hand", "*3/4 tests collected (1 deselected)*"])
    assert "test_of_no_gateway" not in result.stdout.str()


def test_a_test_that_starts_a_gateway_unmarked_fails_saying_so(pytester: pytest.Pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sample="""
from gateway.testing import GatewayProcess

def test_own_gateway(tmp_path):
    GatewayProcess(tmp_path / "state", None, tmp_path).start()
""")
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_own_gateway starts a gateway without the mark @pytest.mark.gateway*"])

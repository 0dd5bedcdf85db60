"""The gateway's suite: a shared gateway process per module and zeep clients for it (the processes come from
``gateway.testing``, which the client library's suite uses too)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from gateway import testing
from gateway.testing import QUEUE_ONLY, GatewayProcess, MarkCheck, module_gateway, start_gateway, zeep_client
from tests.accounts import accounts, traversable
from tests.live_pool import live_pool, live_state

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")

ROOT = Path(__file__).resolve().parents[1]
#: fixtures kept in the repository, with their provenance in tests/data/README.md
DATA = ROOT / "tests" / "data"
LEGACY_WSDL = DATA / "legacy" / "condorSchedd-7.2.4.wsdl"
LEGACY_COLLECTOR_WSDL = DATA / "legacy" / "condorCollector-7.2.4.wsdl"
WIRE = DATA / "wire"

__all__ = ["GatewayProcess", "QUEUE_ONLY", "accounts", "live_pool", "live_state", "module_gateway", "start_gateway",
           "traversable", "zeep_client"]

def require_java() -> None:
    """Skip the calling test where the Java toolchain the generated clients need is missing."""
    missing = [tool for tool in ("java", "javac", "wsimport") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no Java toolchain here ({', '.join(missing)} missing); ./dev test installs it")


#: when a fake clock starts (a real-looking epoch time, so timestamps in ads look like a schedd's)
CLOCK_START = 1_700_000_000


def pytest_configure(config: pytest.Config) -> None:
    """Mark the tests that start gateways, and fail one that starts a gateway unmarked (see GATEWAY_MARK)."""
    testing.MARK_CHECK = MarkCheck()
    config.pluginmanager.register(testing.MARK_CHECK, "gateway-mark-check")


@pytest.fixture
def clock() -> Clock:
    """A fake reactor clock for unit tests of leases, expiry and policies."""
    clock = Clock()
    clock.advance(CLOCK_START)
    return clock


#: the default shared gateway: each test uses its own clusters, and no vanilla job runs
gateway = module_gateway(QUEUE_ONLY)


@pytest.fixture(scope="module")
def schedd(gateway: GatewayProcess):
    """A zeep client built from the WSDL the gateway serves."""
    import zeep

    return zeep.Client(gateway.url + "condorSchedd.wsdl").service


@pytest.fixture(scope="module", params=["served", "legacy"])
def any_schedd(request: pytest.FixtureRequest, gateway: GatewayProcess):
    """zeep clients from the served WSDL and from the shipped 7.2.4 WSDL (location overridden)."""
    wsdl = gateway.url + "condorSchedd.wsdl" if request.param == "served" else str(LEGACY_WSDL)
    return zeep_client(wsdl, gateway.url)


@pytest.fixture(scope="session")
def amqp_broker(tmp_path_factory: pytest.TempPathFactory):
    """One private RabbitMQ broker for the session (its own node, ports and directories; stopped at the end), with
    a second login, ``llalice``, for the tests of the broker-checked user_id."""
    from gateway.testing_broker import RabbitBroker, available

    if not available():
        pytest.fail("rabbitmq-server is not installed (./dev test installs it)")
    broker = RabbitBroker(tmp_path_factory.mktemp("rabbitmq"), users={"llalice": "llalice-secret"}).start()
    yield broker
    broker.close()

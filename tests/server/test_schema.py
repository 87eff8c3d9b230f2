"""schemathesis over /openapi.json of a real server: generated requests for
every operation, valid and invalid; no answer is a 5xx, and every answer
matches the document (status, content type, body schema)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from .live import LiveServer, start_server

# A forecast's until must be later than the store's now, and at most 10,000
# steps away: no schema can say either, so a forecast that fits the document
# may be refused, for these two reasons only (a 400 that the document lists)
CLOCK_REFUSALS = ("until must be later than now", "a forecast takes at most 10000 steps")
# A PUT of limits must set at least one, and a group's own limits are not
# every group's defaults: a query parameter and a body that no schema ties
LIMITS_REFUSALS = ("give at least one limit", "group_rate, group_per")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # SQLite: the contract is the server's, the store is tested elsewhere
    server = start_server(f"sqlite:///{tmp_path_factory.mktemp('schema') / 'c.db'}")
    yield server
    server.stop()


def _operations(url: str) -> list[Any]:
    document = schemathesis.openapi.from_url(f"{url}/openapi.json")
    return [result.ok() for result in document.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_the_api_keeps_its_document(live: LiveServer, mode: GenerationMode) -> None:
    operations = _operations(live.url)
    assert len(operations) >= 20
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck),
                  database=None)  # fmt: skip
        def check(case: Any) -> None:
            if any("%" in str(v) for v in (case.path_parameters or {}).values()):
                return  # schemathesis sends a % in a path as it is: a client's mistake
            body = case.body
            if case.path.endswith("/reserve") and isinstance(body, dict):
                wait = body.get("wait")
                if isinstance(wait, int | float) and 0 < wait <= 60:  # a valid long poll
                    body["wait"] = 0  # of the generated length would only cost time
            refusals = {"/forecast": CLOCK_REFUSALS, "/limits": LIMITS_REFUSALS}
            known = refusals.get(case.path[case.path.rfind("/") :])
            if known:  # a request the document allows may meet these refusals only
                answer = case.call(base_url=live.url, timeout=30)
                case.validate_response(answer, excluded_checks=[positive_data_acceptance])
                if mode is GenerationMode.POSITIVE and answer.status_code == 400:
                    assert answer.json()["error"]["message"].startswith(known), answer.text
                return
            case.call_and_validate(base_url=live.url, timeout=30)

        try:
            check()
        except Unsatisfiable:  # nothing to send wrong: no parameter, no body
            assert mode is GenerationMode.NEGATIVE and "{" not in operation.path

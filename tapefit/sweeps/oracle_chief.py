"""The chief of a distributed keras-tuner search: its oracle served until every tuner is done.

keras-tuner's own server loop (`keras_tuner.src.distribute.oracle_chief.start_server`) looks
once a second whether a tuner was told to stop, then sleeps in steps of 20 s until the other
tuners have finished: a search whose tuners end a moment apart lingered up to 20 s before the
chief wrote its summary. This loop serves the same servicer and ends on the same condition
(no trial running, every tuner told to stop: no tuner is left calling a server that is gone),
looking every `poll_s`.
"""

from __future__ import annotations

import time
from concurrent import futures
from typing import Any

# How often the chief looks whether the search has ended (keras-tuner: 1 s, then 20 s).
POLL_S = 0.1


def search_ended(oracle: Any) -> bool:
    """No trial is running and every tuner was told to stop (keras-tuner's `exit_chief`).

    Example:
        >>> import keras_tuner as kt
        >>> search_ended(kt.oracles.RandomSearchOracle(objective="loss", max_trials=1))
        True
    """
    from keras_tuner.src.distribute.oracle_chief import exit_chief

    return bool(exit_chief(oracle))


def serve_oracle(oracle: Any, address: str, poll_s: float = POLL_S) -> None:
    """Serve `oracle` to the tuners at `address` (`host:port`; one request at a time, as
    keras-tuner serves it) until a tuner has been told to stop and the search has ended
    (`search_ended`), then stop the server.

    Args:
        oracle: The search's keras-tuner oracle (the chief's, which holds every trial).
        address: Where the tuners call it (keras-tuner's `KERASTUNER_ORACLE_IP:..._PORT`).
        poll_s: Seconds between two looks at whether the search has ended.

    Example:
        A search of one trial, its tuner a gRPC client in this process:

        >>> import socket, tempfile, threading
        >>> import grpc, keras_tuner as kt
        >>> from keras_tuner.src import protos
        >>> oracle = kt.oracles.RandomSearchOracle(objective="loss", max_trials=1)
        >>> oracle._set_project_dir(tempfile.mkdtemp(), "search")
        >>> oracle.verbose = 0
        >>> with socket.socket() as probe:
        ...     probe.bind(("127.0.0.1", 0))
        ...     address = f"127.0.0.1:{probe.getsockname()[1]}"
        >>> chief = threading.Thread(target=serve_oracle, args=(oracle, address))
        >>> chief.start()
        >>> tuner = protos.get_service_grpc().OracleStub(grpc.insecure_channel(address))
        >>> ask = protos.get_service().CreateTrialRequest(tuner_id="tuner0")
        >>> trial = tuner.CreateTrial(ask, wait_for_ready=True).trial
        >>> _ = tuner.EndTrial(protos.get_service().EndTrialRequest(trial=trial))
        >>> kt.engine.trial.TrialStatus.from_proto(tuner.CreateTrial(ask).trial.status)
        'STOPPED'
        >>> chief.join(timeout=5)
        >>> chief.is_alive()
        False
    """
    import grpc
    from keras_tuner.src import protos
    from keras_tuner.src.distribute.oracle_chief import OracleServicer

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    servicer = OracleServicer(oracle)
    protos.get_service_grpc().add_OracleServicer_to_server(servicer, server)
    server.add_insecure_port(address)
    server.start()
    try:
        while not (servicer.stop_triggered and search_ended(oracle)):
            time.sleep(poll_s)
    finally:
        server.stop(grace=None)

"""The chief of a distributed search serves its oracle until the last tuner is done."""

import socket
import threading
import time

import grpc
import keras_tuner as kt
from keras_tuner.src import protos

from tapefit.sweeps.oracle_chief import search_ended, serve_oracle


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def test_the_chief_waits_for_the_last_trial_and_ends_once_every_tuner_is_told_to_stop(tmp_path):
    space = kt.HyperParameters()
    space.Int("units", 1, 1000)  # room for two different trials
    oracle = kt.oracles.RandomSearchOracle(objective="loss", max_trials=2, hyperparameters=space)
    oracle._set_project_dir(str(tmp_path), "search")
    oracle.verbose = 0
    address = free_address()
    chief = threading.Thread(target=serve_oracle, args=(oracle, address), daemon=True)
    chief.start()
    stub = protos.get_service_grpc().OracleStub(grpc.insecure_channel(address))
    service = protos.get_service()

    def ask(tuner):
        request = service.CreateTrialRequest(tuner_id=tuner)
        trial = stub.CreateTrial(request, wait_for_ready=True).trial
        return trial, kt.engine.trial.TrialStatus.from_proto(trial.status)

    first, status0 = ask("tuner0")
    second, status1 = ask("tuner1")
    assert (status0, status1) == ("RUNNING", "RUNNING")
    stub.EndTrial(service.EndTrialRequest(trial=first))
    assert ask("tuner0")[1] == "STOPPED"  # no trial left for tuner0, but tuner1's still runs
    time.sleep(1.5)  # past keras-tuner's 1 s look, which would then sleep 20 s
    assert chief.is_alive() and not search_ended(oracle)
    stub.EndTrial(service.EndTrialRequest(trial=second))
    assert ask("tuner1")[1] == "STOPPED"
    chief.join(timeout=10)  # keras-tuner's own loop would sleep 20 s here
    assert not chief.is_alive()
    assert search_ended(oracle) and sorted(oracle.trials) == sorted(
        [first.trial_id, second.trial_id]
    )

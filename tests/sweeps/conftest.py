"""Fixtures of the search tests: the random search composed once a session, and its
specification with any keys set."""

import pytest
from omegaconf import OmegaConf


@pytest.fixture(scope="session")
def random_search():
    """`tune=random` over the classifier's space, composed as the CLI composes it."""
    from tapefit.runner.composition import compose

    return compose(["tune=random"])


@pytest.fixture(scope="session")
def search_spec(random_search):
    """`search_spec(key=value, ...)`: the random search's `SearchSpec` with those keys set
    (`tune__max_trials=2` sets `tune.max_trials`); composed once: the subjects are the spec's
    users, not the composition."""
    from tapefit.sweeps.spec import SearchSpec

    def of(**values):
        cfg = random_search.copy()
        for key, value in values.items():
            OmegaConf.update(cfg, key.replace("__", "."), value)
        return SearchSpec.of(cfg)

    return of

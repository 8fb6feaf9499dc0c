"""What a sweep leaves behind (`tapefit.sweeps.records`): the HParams view's typed domains."""


def test_hparam_domains_are_typed():
    from tapefit.config.schemas import SpaceEntry
    from tapefit.config.typed import typed
    from tapefit.sweeps.records import hparam_domain

    def entry(**fields):
        return typed(
            SpaceEntry, {"type": "choice", "min": None, "max": None, "values": None} | fields
        )

    assert hparam_domain(entry(type="bool")).dtype is bool
    assert hparam_domain(entry(values=[32, 64])).values == [32, 64]
    assert hparam_domain(entry(values=[32, 64])).dtype is int
    assert hparam_domain(entry(values=[0.5, 1])).values == [0.5, 1.0]
    assert hparam_domain(entry(type="int", min=1, max=4)).max_value == 4
    assert hparam_domain(entry(type="float", min=0.1, max=0.5), placeholder=0.0).min_value == 0.0
    assert hparam_domain(entry(values=["a", "b"]), placeholder="c").values == ["a", "b", "c"]

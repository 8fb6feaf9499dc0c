"""`tapefit.protocols`: `hook` finds an optional hook by duck typing, only when callable."""

from types import SimpleNamespace

from tapefit.protocols import hook


class Model:
    uses_text_ids = True  # an attribute, not a hook
    report = None  # declared but not offered

    @classmethod
    def default_objective(cls, data_config):
        return f"val_{cls.__name__.lower()}"

    def compile_defaults(self):
        return {"loss": "mse"}


def test_hook_returns_the_bound_callable_a_model_or_its_class_offers():
    found = hook(Model(), "compile_defaults")
    assert found() == {"loss": "mse"}
    assert hook(Model, "default_objective")({}) == "val_model"


def test_hook_is_none_for_a_missing_or_non_callable_attribute():
    assert hook(Model(), "encode") is None
    assert hook(Model(), "uses_text_ids") is None
    assert hook(Model(), "report") is None


def test_hook_finds_a_callable_attribute_of_a_data_object():
    data = SimpleNamespace(model_arguments=lambda: {"num_classes": 3}, unlabelled={"test": "x"})
    assert hook(data, "model_arguments")() == {"num_classes": 3}
    assert hook(data, "unlabelled") is None

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


def test_the_written_protocol_lists_every_hook_a_run_looks_up():
    """Each optional hook tapefit finds by name (`hook(obj, "name")`, or `hasattr`/`getattr` on
    a model, data object, loss or callback) is one `tapefit.protocols` documents; what else
    is read so is Keras' own (`Model.optimizers`, `jit_compile`, ...) or Python's."""
    import ast
    from pathlib import Path

    import tapefit
    from tapefit import protocols

    owners = {"model", "data", "callback", "loss", "returned"}
    keras_own = {"optimizers", "steps_per_execution", "jit_compile", "train", "val", "test"}
    tapefit_own = {"matryoshka_dims"}  # read on tapefit's own SiameseModel, not a hook
    looked_up = set()
    for path in Path(tapefit.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            arguments = node.args
            if len(arguments) < 2 or not isinstance(arguments[1], ast.Constant):
                continue
            owner = arguments[0]
            named_owner = isinstance(owner, ast.Name) and owner.id in owners
            if node.func.id == "hook" or (node.func.id in ("hasattr", "getattr") and named_owner):
                looked_up.add(arguments[1].value)
    hooks = {n for n in looked_up - keras_own - tapefit_own if not n.startswith("_")}
    assert {name for name in hooks if f"`{name}" not in protocols.__doc__} == set()
    assert {"compile_defaults", "get_state", "use_intervals", "encode", "diagnose"} <= hooks

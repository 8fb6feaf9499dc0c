"""Model families: tapefit's own (`classifier`, `siamese`), `TargetFamily` for any model named
by `_target_`, and families of your own, registered with `@register` in a module that the
`tapefit.families` entry-point group or the `families` config key names."""

import importlib

from tapefit.families.base import (
    ENTRY_POINT_GROUP,
    FAMILIES,
    Dataset,
    Family,
    import_family_modules,
    load_entry_point_families,
    register,
)
from tapefit.families.lookup import family_for, objective_of

for _builtin in ("classifier", "siamese"):  # they register themselves on import
    importlib.import_module(f"{__name__}.{_builtin}")

load_entry_point_families()

__all__ = [
    "ENTRY_POINT_GROUP",
    "FAMILIES",
    "Dataset",
    "Family",
    "family_for",
    "import_family_modules",
    "objective_of",
    "register",
]

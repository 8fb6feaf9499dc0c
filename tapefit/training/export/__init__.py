"""`trainer.export=true`: a TensorFlow SavedModel for serving in the run directory's `export/`,
and the other formats of `trainer.export_formats` beside it, each checked against the model.

The artefact holds traced functions and weights only, so `tf.saved_model.load(path)` serves it
without tapefit or any custom Keras class. What its endpoints take is the model's choice
(`serving_endpoints()`); every artefact has `serve`, which is also its `serving_default` signature.
ONNX, LiteRT and OpenVINO files go to `export/<format>/<endpoint>.<suffix>`
(`tapefit.training.export.writers`), and `export/verify.json` records how far each export's
outputs lie from the Keras model's on the first test batch. The whole folder is written aside
and renamed into place only once every export has passed that check.

The package's parts: `formats` (what each format is and needs), `endpoints` (what an export
serves), `writers` (one format's files), `runtimes` (each format loaded in its runtime),
`verification` (the outputs checked against the Keras model) and `serving` (the `export/`
folder, written aside and renamed into place).
"""

from tapefit.training.export.endpoints import ENDPOINT, ExportEndpoint, check_exportable
from tapefit.training.export.formats import FORMATS, SAVED_MODEL, VERIFY_FILE
from tapefit.training.export.serving import EXPORT_DIR, export_for_serving
from tapefit.training.export.verification import VerifyBatch, first_batch

__all__ = [
    "ENDPOINT",
    "EXPORT_DIR",
    "FORMATS",
    "SAVED_MODEL",
    "VERIFY_FILE",
    "ExportEndpoint",
    "VerifyBatch",
    "check_exportable",
    "export_for_serving",
    "first_batch",
]

"""An export file run in its own runtime (onnxruntime, LiteRT's interpreter, OpenVINO) on a
batch of digits images, and how far from `model.keras` the export tests let it lie."""

TOLERANCE = 1e-5


def run_onnx(path, images):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["images"]
    return session.run(None, {"images": images})[0]


def run_litert(path, images):
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(path)).get_signature_runner()
    assert list(runner.get_input_details()) == ["images"]
    return runner(images=images)["output_0"]


def run_openvino(path, images):
    import openvino as ov

    compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([images])[compiled.outputs[0]]

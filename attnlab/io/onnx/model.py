"""ONNX files on disk: torch's TorchScript-based exporter run quietly, the written model's
inputs and outputs put in their documented form, and onnxruntime sessions."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings

import torch

__all__ = ["run_exporter", "quiet", "session", "finish_model", "have", "require", "first_line"]


def run_exporter(module, args, path, input_names, output_names, dyn, opset, fold=True):
    with quiet():
        torch.onnx.export(module, args, str(path), dynamo=False, opset_version=opset,
                          input_names=list(input_names), output_names=list(output_names),
                          dynamic_axes=dyn, do_constant_folding=fold)



@contextlib.contextmanager
def quiet():
    """Silences the exporter: its Python warnings, the graph dump it prints when it fails, and
    the C++ shape-inference notes it writes to the process's stderr."""
    with warnings.catch_warnings(), contextlib.ExitStack() as stack:
        warnings.simplefilter("ignore")
        sink = stack.enter_context(tempfile.TemporaryFile())
        for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):   # the process's own descriptors
            _flush(stream)
            try:
                saved = os.dup(fd)
            except OSError:
                continue
            os.dup2(sink.fileno(), fd)
            stack.callback(_restore_fd, stream, fd, saved)
        devnull = stack.enter_context(open(os.devnull, "w"))
        stack.enter_context(contextlib.redirect_stdout(devnull))
        stack.enter_context(contextlib.redirect_stderr(devnull))
        yield


def _flush(stream):
    try:
        stream.flush()
    except (AttributeError, OSError, ValueError):
        pass


def _restore_fd(stream, fd, saved):
    _flush(stream)
    os.dup2(saved, fd)
    os.close(saved)


def session(path):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 4            # failures come back as exceptions, not as log lines
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def finish_model(path, ex, dyn):
    """The exporter drops inputs nothing reads (e.g. the mask of an input no masked layer
    sees); put them back so that every model has the documented inputs, in order."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(path))
    graph = model.graph
    present = {i.name: i for i in graph.input}
    flat = dict(zip(ex.onnx_inputs, ex.flat()))
    ordered = []
    for name in ex.onnx_inputs:
        if name in present:
            ordered.append(present[name])
            continue
        t = flat[name]
        elem = TensorProto.BOOL if t.dtype == torch.bool else \
            TensorProto.DOUBLE if t.dtype == torch.float64 else TensorProto.FLOAT
        dims = [dyn.get(name, {}).get(i, int(s)) for i, s in enumerate(t.shape)]
        ordered.append(helper.make_tensor_value_info(name, elem, dims))
    rest = [i for i in graph.input if i.name not in set(ex.onnx_inputs)]    # initializers, if any
    del graph.input[:]
    graph.input.extend(ordered + rest)
    for out in graph.output:
        spec = ex.out_specs.get(out.name)
        dims = out.type.tensor_type.shape.dim
        if spec is None or len(dims) != len(spec.sizes):
            continue
        for i, size in enumerate(spec.sizes):
            if size is not None:
                dims[i].Clear()
                dims[i].dim_value = size
            elif i in dyn.get(out.name, {}):
                dims[i].Clear()
                dims[i].dim_param = dyn[out.name][i]
    model.doc_string = ("attnlab network. Inputs: " + ", ".join(ex.onnx_inputs) + ". A '<input>_mask' "
                        "input is the padding mask of a sequence input: bool B×T, True = real step.")
    onnx.helper.set_model_props(model, {"attnlab.inputs": ",".join(ex.names),
                                        "attnlab.masks": ",".join(n for n, m in zip(ex.names, ex.with_mask) if m),
                                        "attnlab.mask_convention": "True = real time step"})
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


# ------------------------------------------------------------------------------- checking ---


def have(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


def require(module: str):
    if not have(module):
        raise ImportError(f"ONNX export needs the '{module}' package: pip install onnx "
                          "onnxruntime (or pip install 'attnlab[onnx]').")


def first_line(e) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__

"""ONNX export: the exporter, the model it writes, and the search for the layer that
cannot be exported."""

"""wgattn: attention kernels written once in WGSL, run in the browser's WebGPU and natively through
wgpu-py, each result checked against one NumPy reference.

Importing the package is cheap and pure Python: the page imports it under Pyodide (Python 3.8,
numpy 1.17). The native runner (`wgattn.native`) needs wgpu-py and is imported on demand.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]

"""wgattn's exceptions, so that callers classify an error by its type, never by its message.

    WgattnError                  every error wgattn raises on purpose
      CompileError(ValueError)     WGSL that does not compile or link on this adapter (native
                                   pipeline creation; the page's executor throws its JS twin,
                                   static/webgpu.js CompileError)
      InterfaceMismatch(ValueError)  a kernel (or an interface's plan) that does not match its
                                   interface: a Params field or a binding missing, unknown or
                                   misplaced
      DoesNotFit(ValueError)       a plan that exceeds an adapter's limits or lacks its features
                                   (buffer sizes, workgroup storage, invocations, shader-f16)
      AdapterError(RuntimeError)   no usable adapter: none found, or one that computes wrong
                                   answers (a driver that truncates long loops)

The first three are ValueErrors (the caller's input or choice of kernel: the API answers 422);
AdapterError is not (the machine's: the API answers 503). The module needs nothing but Python 3.8
(the page imports it under Pyodide, and the server without importing wgpu).
"""

__all__ = ["WgattnError", "CompileError", "InterfaceMismatch", "DoesNotFit", "AdapterError"]


class WgattnError(Exception):
    """An error wgattn raises on purpose; the message says what failed and what is allowed."""


class CompileError(WgattnError, ValueError):
    """WGSL that does not compile or link: nothing else will run with it."""


class InterfaceMismatch(WgattnError, ValueError):
    """A kernel or plan that does not match its interface."""


class DoesNotFit(WgattnError, ValueError):
    """A plan that exceeds the adapter's limits or needs a feature it lacks: another
    implementation or smaller sizes may fit."""


class AdapterError(WgattnError, RuntimeError):
    """No usable adapter: none found, or one that computes wrong answers."""
